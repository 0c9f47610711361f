"""The vendor contract's case for Cambricon: MLUs as HAMi reads them from node capacity
(100 vcores each, the vmemory units shared evenly; at least one) and asks of HAMi's
three resources, cores defaulting to 100 (whole MLUs)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.cambricon import cambricon_vendors

_VENDOR = cambricon_vendors({})


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        cards = draw(st.integers(1, 4))
        capacity = {
            "cambricon.com/mlu.smlu.vcore": str(100 * cards),
            "cambricon.com/mlu.smlu.vmemory": str(cards * draw(st.sampled_from([16, 64, 96]))),
        }
        return _VENDOR.devices_from_capacity(node, capacity)

    return draw()


_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 256, 4096, 16384]),
    memory_percent=st.just(0),
    cores=st.sampled_from([0, 10, 50, 100, 100]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {"cambricon": VendorCase(_VENDOR, _devices, _CONTAINERS)}
