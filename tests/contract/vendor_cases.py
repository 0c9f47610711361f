"""What the vendor contract suite needs of each vendor: the vendor, and what its devices
and its containers' requests look like (hypothesis strategies).

A vendor added to ``vgpu_extender.vendors.registry.VENDORS`` adds its case here (a factory
of several vendors, as Ascend's one per chip, adds ``<name>:<word>`` cases); the suite fails
until it does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors import Vendor
from vgpu_extender.vendors.ascend.inventory_codec import MODE_VNPU, network_id
from vgpu_extender.vendors.registry import create_vendor, create_vendors

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

_ASCEND = {vendor.name: vendor for vendor in create_vendors("ascend")}


def _ascend_devices(word: str) -> DevicesOf:
    """Chips of one kind as the plugin registers them: at least one (HAMi refuses an
    empty registration), the chip's memory and cores, NetworkID where the plugin sets it,
    and ids 2k and 2k+1 for the two NPUs of a 910C module."""
    chip = _ASCEND[word].chip  # type: ignore[attr-defined]

    def of(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
        @st.composite
        def draw_devices(draw: st.DrawFn) -> tuple[Device, ...]:
            count = draw(st.integers(1, 6))
            devices = []
            for i in range(count):
                network = network_id(word, i)
                devices.append(
                    Device(
                        uuid=f"{node}-dev{i}",
                        index=i,
                        count=draw(st.integers(1, chip.slots)),
                        memory_mib=chip.memory_allocatable,
                        cores=chip.ai_core,
                        type=word,
                        mode=MODE_VNPU,
                        healthy=draw(st.integers(0, 9)) > 0,
                        vendor=word,
                        custom_info=() if network is None else (("NetworkID", network),),
                    )
                )
            return tuple(devices)

        return draw_devices()

    return of


def _ascend_containers(word: str) -> st.SearchStrategy[ContainerRequest]:
    chip = _ASCEND[word].chip  # type: ignore[attr-defined]
    memories = [0, *(t.memory for t in chip.templates), chip.memory_allocatable]
    return st.builds(
        ContainerRequest,
        name=st.just("c"),
        count=st.sampled_from([1, 1, 2, 3, 4]),
        memory_mib=st.sampled_from(memories),
        memory_percent=st.just(0),
        cores=st.sampled_from([0, 0, 5, 20]),
    ).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))


def _ascend_case(word: str) -> VendorCase:
    return VendorCase(_ASCEND[word], _ascend_devices(word), _ascend_containers(word))


from tests.contract import (  # noqa: E402  (after the local cases they extend)
    cases_amd,
    cases_awsneuron,
    cases_cambricon,
    cases_enflame,
    cases_hygon,
    cases_iluvatar,
    cases_kunlun,
    cases_metax,
    cases_mthreads,
)

CASES: dict[str, VendorCase] = {
    "nvidia": VendorCase(create_vendor("nvidia"), _nvidia_devices, _NVIDIA_CONTAINERS),
    # One of each rule: NetworkID rings (910B3), module pairs (910C), no topology (310P).
    **{
        f"ascend:{word}": _ascend_case(word) for word in ("Ascend910B3", "Ascend910C", "Ascend310P")
    },
    **cases_cambricon.CASES,
    **cases_hygon.CASES,
    **cases_iluvatar.CASES,
    **cases_metax.CASES,
    **cases_enflame.CASES,
    **cases_kunlun.CASES,
    **cases_mthreads.CASES,
    **cases_awsneuron.CASES,
    **cases_amd.CASES,
}
