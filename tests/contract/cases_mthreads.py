"""The vendor contract's case for Moore Threads: GPUs as HAMi reads them from node
capacity (16 cores each, the memory units shared evenly; at least one) and asks of
HAMi's three resources per GPU (memory in 512 MiB steps, cores in sixteenths)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.mthreads import mthreads_vendors

_VENDOR = mthreads_vendors({})


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        gpus = draw(st.integers(1, 4))
        capacity = {
            "mthreads.com/sgpu-core": str(16 * gpus),
            "mthreads.com/sgpu-memory": str(gpus * draw(st.sampled_from([32, 96]))),
        }
        return _VENDOR.devices_from_capacity(node, capacity)

    return draw()


_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 1024, 4096, 16384, 49152]),
    memory_percent=st.just(0),
    cores=st.sampled_from([0, 1, 4, 16, 100]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {"mthreads": VendorCase(_VENDOR, _devices, _CONTAINERS)}
