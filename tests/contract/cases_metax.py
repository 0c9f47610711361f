"""The vendor contract's cases for MetaX: whole cards as HAMi makes them up from node
capacity, and sGPUs as the plugin's ``node-gpu-devices`` lists them (at least one)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.metax import metax_vendors

GPU, SGPU = metax_vendors({})


def _gpus(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                uuid=f"{node}-metax-{i}",
                index=i,
                count=1,
                memory_mib=65536,
                cores=100,
                type="Metax-GPU",
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="Metax-GPU",
            )
            for i in range(draw(st.integers(1, 8)))
        )

    return draw()


def _sgpus(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                uuid=f"{node}-dev{i}",
                index=i,
                count=draw(st.sampled_from([1, 4, 16])),
                memory_mib=draw(st.sampled_from([32768, 65536])),
                cores=100,
                type="Metax-SGPU",
                numa=draw(st.integers(0, 1)),
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="Metax-SGPU",
                custom_info=(
                    ("LinkZone", draw(st.integers(0, 2))),
                    ("Model", "sgpu"),
                    ("QosPolicy", draw(st.sampled_from(["best-effort", "fixed-share"]))),
                ),
            )
            for i in range(draw(st.integers(1, 4)))
        )

    return draw()


_GPU_ASKS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 4]),
    memory_percent=st.just(100),
    cores=st.just(100),
)
_SGPU_ASKS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 1024, 16384, 40000]),
    memory_percent=st.just(0),
    cores=st.sampled_from([0, 10, 50, 100]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {
    "metax:Metax-GPU": VendorCase(GPU, _gpus, _GPU_ASKS),
    "metax:Metax-SGPU": VendorCase(SGPU, _sgpus, _SGPU_ASKS),
}
