"""The vendor contract's case for AMD: GPUs as the amd-device-plugin registers them
(``count`` slots, MiB, compute units; at least one, as HAMi refuses an empty
registration) and asks of HAMi's three resources."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.amd import amd_vendors


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                uuid=f"{node}-dev{i}",
                index=i,
                count=draw(st.integers(1, 10)),
                memory_mib=draw(st.sampled_from([8192, 196608])),
                cores=draw(st.sampled_from([100, 304])),
                type=draw(st.sampled_from(["amd", "AMD Instinct MI300X VF"])),
                numa=draw(st.integers(0, 1)),
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="AMD",
            )
            for i in range(draw(st.integers(1, 4)))
        )

    return draw()


_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 1024, 4096, 9000]),
    memory_percent=st.just(0),
    cores=st.sampled_from([1, 25, 50, 100]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {"amd": VendorCase(amd_vendors({}), _devices, _CONTAINERS)}
