"""The vendor contract's case for Iluvatar, one chip (MR-V100): GPUs as the vendor's
plugin registers them (split count, MiB, 100 cores, some unhealthy; at least one) and
asks of the chip's three resources, cores 0 when absent."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.iluvatar import iluvatar_vendors

_VENDOR = next(vendor for vendor in iluvatar_vendors({}) if vendor.name == "MR-V100")


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                uuid=f"{node}-dev{i}",
                index=i,
                count=draw(st.integers(1, 10)),
                memory_mib=draw(st.sampled_from([8192, 16384])),
                cores=100,
                type="MR-V100",
                numa=draw(st.integers(0, 1)),
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="MR-V100",
            )
            for i in range(draw(st.integers(1, 4)))
        )

    return draw()


_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 256, 2048, 9216]),
    memory_percent=st.just(0),
    cores=st.sampled_from([0, 0, 10, 50, 100, 200]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {
    "iluvatar:MR-V100": VendorCase(_VENDOR, _devices, _CONTAINERS),
}
