"""The vendor contract's cases for Enflame: whole GCUs as HAMi makes them up from node
capacity, and DRS GCUs of six slices with asks of the plugin's three profiles."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.enflame import enflame_vendors
from vgpu_extender.vendors.enflame.config import DEFAULT_PROFILES

GCU, DRS = enflame_vendors({})


def _gcus(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(f"{node}-GCU-{i}", i, 1, 100, 100, "GCU", vendor="GCU")
            for i in range(draw(st.integers(1, 8)))
        )

    return draw()


def _drs(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                f"{node}-enflame-drs-{i}",
                i,
                6,
                40960,
                100,
                "Enflame",
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="Enflame",
                custom_info=(("index", str(i)), ("maxSlice", 6), ("minor", str(i))),
            )
            for i in range(draw(st.integers(1, 4)))
        )

    return draw()


_GCU_ASKS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_percent=st.just(100),
    cores=st.just(100),
)
_DRS_ASKS = st.sampled_from(DEFAULT_PROFILES).map(
    lambda p: ContainerRequest("c", 1, p.memory_mib, 0, p.core_percent)
)

CASES: dict[str, VendorCase] = {
    "enflame:GCU": VendorCase(GCU, _gcus, _GCU_ASKS),
    "enflame:Enflame": VendorCase(DRS, _drs, _DRS_ASKS),
}
