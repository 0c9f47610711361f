"""The vendor contract's case for AWS Neuron: devices as HAMi makes them up from node
capacity (two cores each; ring-wired ``inf2`` or aligned ``trn1`` instances) and asks by
device count or by cores."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.awsneuron import awsneuron_vendors


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        kind = draw(st.sampled_from(["inf2.24xlarge", "trn1.32xlarge"]))
        return tuple(
            Device(
                f"{node}-AWSNeuron-{i}",
                i,
                2,
                0,
                2,
                "AWSNeuron",
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="AWSNeuron",
                custom_info=(("AWSNodeType", kind),),
            )
            for i in range(draw(st.integers(1, 8)))
        )

    return draw()


_ASKS = st.one_of(
    st.builds(lambda n: ContainerRequest("c", n, 0, 0, 0), st.sampled_from([1, 1, 2, 3, 4])),
    st.builds(
        lambda c: ContainerRequest("c", max(1, c // 2), 0, 0, min(c, 2)),
        st.sampled_from([1, 2, 4]),
    ),
)

CASES: dict[str, VendorCase] = {"awsneuron": VendorCase(awsneuron_vendors({}), _devices, _ASKS)}
