"""The vendor contract's cases for Kunlunxin: whole XPUs as HAMi makes them up from node
capacity (two wings of four), and vXPUs as the plugin registers them, with asks of
every count the wing rule allows and some it refuses."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import DevicesOf, VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.kunlun import kunlun_vendors
from vgpu_extender.vendors.kunlun.request import TEMPLATES, cores_of

WHOLE, VXPU = kunlun_vendors({})


def _xpus(word: str, counts: tuple[int, ...]) -> DevicesOf:
    def of(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
        @st.composite
        def draw(draw: st.DrawFn) -> tuple[Device, ...]:
            total = draw(st.integers(1, 8))
            return tuple(
                Device(
                    f"{node}-kunlun-{i}",
                    i,
                    draw(st.sampled_from(counts)),
                    98304,
                    100,
                    word,
                    numa=1 if i >= total // 2 else 0,
                    healthy=draw(st.integers(0, 9)) > 0,
                    vendor=word,
                )
                for i in range(total)
            )

        return draw()

    return of


_WHOLE_ASKS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 2, 2, 3, 4, 8]),
    memory_percent=st.just(100),
    cores=st.just(100),
)
_VXPU_ASKS = st.builds(
    lambda count, memory: ContainerRequest("c", count, memory, 0, cores_of(memory)),
    st.sampled_from([1, 2, 4, 3]),
    st.sampled_from(TEMPLATES),
)

CASES: dict[str, VendorCase] = {
    "kunlun:kunlun": VendorCase(WHOLE, _xpus("kunlun", (100,)), _WHOLE_ASKS),
    "kunlun:XPU": VendorCase(VXPU, _xpus("XPU", (1, 4)), _VXPU_ASKS),
}
