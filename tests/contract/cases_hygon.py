"""The vendor contract's case for Hygon: DCUs as the DCU plugin registers them (four
vDCUs a card, MiB, 100 cores, ``DCU-<model>`` types, some unhealthy; at least one) and
asks of HAMi's three resources, cores defaulting to 100 (whole DCUs)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.contract.vendor_cases import VendorCase
from vgpu_extender.domain import ContainerRequest, Device
from vgpu_extender.vendors.hygon import hygon_vendors


def _devices(node: str) -> st.SearchStrategy[tuple[Device, ...]]:
    @st.composite
    def draw(draw: st.DrawFn) -> tuple[Device, ...]:
        return tuple(
            Device(
                uuid=f"{node}-dev{i}",
                index=i,
                count=draw(st.integers(1, 4)),
                memory_mib=draw(st.sampled_from([16368, 65520])),
                cores=100,
                type=draw(st.sampled_from(["DCU-K100_AI", "DCU-Z100L"])),
                numa=draw(st.integers(0, 1)),
                mode="hami",
                healthy=draw(st.integers(0, 9)) > 0,
                vendor="DCU",
            )
            for i in range(draw(st.integers(1, 4)))
        )

    return draw()


_CONTAINERS = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.sampled_from([1, 1, 2, 3]),
    memory_mib=st.sampled_from([0, 2048, 8192, 20000]),
    memory_percent=st.just(0),
    cores=st.sampled_from([0, 1, 25, 50, 100]),
).map(lambda c: c if c.memory_mib else ContainerRequest(c.name, c.count, 0, 100, c.cores))

CASES: dict[str, VendorCase] = {"hygon": VendorCase(hygon_vendors({}), _devices, _CONTAINERS)}
