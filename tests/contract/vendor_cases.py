"""What the vendor contract suite needs of each vendor: the vendor, and what its devices
and its containers' requests look like (hypothesis strategies).

A vendor added to ``vgpu_extender.vendors.registry.VENDORS`` adds its case here; the suite
fails until it does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors import Vendor
from vgpu_extender.vendors.registry import create_vendor

#: Strategy of a node's devices, given the node's name (UUIDs ``<node>-dev<i>``).
DevicesOf = Callable[[str], st.SearchStrategy[tuple[Device, ...]]]


@dataclass(frozen=True)
class VendorCase:
    vendor: Vendor
    devices: DevicesOf
    containers: st.SearchStrategy[ContainerRequest]


def _nvidia_devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw_devices(draw: st.DrawFn) -> tuple[Device, ...]:
        count = draw(st.integers(0, 4))
        return tuple(
            Device(
                uuid=f"{node}-dev{i}",
                index=i,
                count=draw(st.integers(1, 4)),
                memory_mib=draw(st.sampled_from([4096, 8192])),
                cores=draw(st.sampled_from([100, 200])),
                type=draw(st.sampled_from(["NVIDIA-A100-SXM4-40GB", "NVIDIA-Tesla T4"])),
                numa=draw(st.integers(0, 1)),
                healthy=draw(st.integers(0, 9)) > 0,
            )
            for i in range(count)
        )

    return draw_devices()


_NVIDIA_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 2000, 3000, 5000, 9000]),
    memory_percent=st.sampled_from([0, 25, 50, 100]),
    cores=st.sampled_from([0, 10, 50, 100]),
)

CASES: dict[str, VendorCase] = {
    "nvidia": VendorCase(create_vendor("nvidia"), _nvidia_devices, _NVIDIA_CONTAINERS),
}
