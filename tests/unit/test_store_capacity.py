"""The bind-time fit re-check, on plain values."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device, DeviceGrant, DeviceUsage, PodAssignment, Reason
from vgpu_extender.store.capacity import committed_usage, find_misfit


def pod(*containers: list[tuple[str, int, int]], init: tuple[bool, ...] = ()) -> PodAssignment:
    return PodAssignment(
        node="n",
        containers=tuple(tuple(DeviceGrant(u, m, c) for u, m, c in cont) for cont in containers),
        init=init,
    )


DEVICES = {
    "g0": Device("g0", count=3, memory_mib=8000, cores=100),
    "g1": Device("g1", count=3, memory_mib=8000, cores=100, healthy=False),
    "g2": Device("g2", count=3, memory_mib=8000, cores=0),
}


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([], {}, id="nothing"),
        # Two pods on g0: 1000+2000 MiB, 10+20 cores, 1+1 slots.
        pytest.param(
            [pod([("g0", 1000, 10)]), pod([("g0", 2000, 20)])],
            {"g0": DeviceUsage(3000, 30, 2)},
            id="sum-over-pods",
        ),
        # One pod, two app containers on g0: grants add up, slots too.
        pytest.param(
            [pod([("g0", 1000, 10)], [("g0", 500, 5)])],
            {"g0": DeviceUsage(1500, 15, 2)},
            id="app-containers-add",
        ),
        # Init 4000 then app 1000 on g0: the pod holds max(4000, 1000), one slot.
        pytest.param(
            [pod([("g0", 4000, 0)], [("g0", 1000, 30)], init=(True, False))],
            {"g0": DeviceUsage(4000, 30, 1)},
            id="init-collapses",
        ),
    ],
)
def test_committed_usage(pods: list[PodAssignment], expected: dict[str, DeviceUsage]) -> None:
    assert committed_usage(pods) == expected


@pytest.mark.parametrize(
    ("used", "new", "cordoned", "reason", "text"),
    [
        pytest.param({}, pod([("g0", 8000, 100)]), set(), None, "", id="whole-device-fits"),
        pytest.param(
            {"g0": DeviceUsage(7000, 0, 1)},
            pod([("g0", 1001, 0)]),
            set(),
            Reason.MEMORY,
            "device g0 on n over-allocated: memory 8001/8000 MiB",
            id="memory",
        ),
        pytest.param(
            {"g0": DeviceUsage(0, 90, 1)},
            pod([("g0", 0, 11)]),
            set(),
            Reason.CORES,
            "cores 101/100",
            id="cores",
        ),
        pytest.param(
            {"g0": DeviceUsage(0, 0, 3)},
            pod([("g0", 0, 0)]),
            set(),
            Reason.SLOTS,
            "slots 4/3",
            id="slots",
        ),
        pytest.param(
            {"g0": DeviceUsage(10, 0, 1)},
            pod([("g0", 10, 100)]),
            set(),
            Reason.EXCLUSIVE,
            "in use by 1 allocation(s)",
            id="exclusive-needs-empty",
        ),
        pytest.param(
            {"g0": DeviceUsage(10, 100, 1)},
            pod([("g0", 10, 0)]),
            set(),
            Reason.NO_COMPUTE,
            "all cores in use (100/100)",
            id="zero-cores-on-full-device",
        ),
        pytest.param({}, pod([("g1", 1, 0)]), set(), Reason.UNHEALTHY, "unhealthy", id="unhealthy"),
        pytest.param({}, pod([("g0", 1, 0)]), {"g0"}, Reason.CORDONED, "cordoned", id="cordoned"),
        pytest.param(
            {}, pod([("gx", 1, 0)]), set(), Reason.UUID_MISMATCH, "not on node n", id="unknown"
        ),
        # A device with no cores has none left to share: the engine never chooses it for
        # a zero-core grant (HAMi's CardComputeUnitsExhausted), and the re-check, which
        # evaluates the same stage table, refuses it too.
        pytest.param(
            {"g2": DeviceUsage(10, 0, 1)},
            pod([("g2", 10, 0)]),
            set(),
            Reason.NO_COMPUTE,
            "all cores in use (0/0)",
            id="coreless-device",
        ),
        # Init 6000 + app 2000 on g0 collapse to 6000: fits next to 2000 in use.
        pytest.param(
            {"g0": DeviceUsage(2000, 0, 1)},
            pod([("g0", 6000, 0)], [("g0", 2000, 0)], init=(True, False)),
            set(),
            None,
            "",
            id="init-collapse-fits",
        ),
    ],
)
def test_find_misfit(
    used: dict[str, DeviceUsage],
    new: PodAssignment,
    cordoned: set[str],
    reason: Reason | None,
    text: str,
) -> None:
    misfit = find_misfit(
        node="n", devices=DEVICES, cordoned=frozenset(cordoned), committed=used, assignment=new
    )
    if reason is None:
        assert misfit is None
    else:
        assert misfit is not None
        assert misfit.reason is reason
        assert text in misfit.message
