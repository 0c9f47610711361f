"""HAMi's generic per-device Fit (Cambricon, Hygon, Iluvatar, Moore Threads) as stages:
each check in HAMi's order on single devices, the same verdicts on a NumPy grid, what a
share takes, and the refusals each vendor words from the shared pieces."""

from __future__ import annotations

import numpy as np
import pytest

from vgpu_extender.domain import ContainerRequest, DeviceUsage, Reason
from vgpu_extender.domain.share import Capacity, HeldShare, Stage
from vgpu_extender.engine.rules import first_failing, fitting_mask
from vgpu_extender.vendors.amd.share import AMD_SHARE
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS
from vgpu_extender.vendors.ascend.share import ascend_share
from vgpu_extender.vendors.awsneuron.share import NEURON_SHARE
from vgpu_extender.vendors.hami_share import clamp_cores, generic_share
from vgpu_extender.vendors.kunlun.share import VXPU_SHARE

SHARE = generic_share("DCU", noun="dcu")


def _ask(memory: int = 0, cores: int = 0, percent: int = 0) -> ContainerRequest:
    return ContainerRequest(
        "c", count=1, memory_mib=memory, memory_percent=percent, cores=cores, vendor="DCU"
    )


#: (case, total (slots, memory, cores), used (slots, memory, cores), ask, first failure)
CASES = [
    ("fits", (4, 16384, 100), (1, 4096, 30), _ask(4096, 30), None),
    ("slots exhausted", (4, 16384, 100), (4, 4096, 30), _ask(1024, 10), Reason.SLOTS),
    ("slots before memory", (1, 100, 100), (1, 100, 0), _ask(1024), Reason.SLOTS),
    ("insufficient memory", (4, 16384, 100), (1, 15000, 0), _ask(2048, 10), Reason.MEMORY),
    ("whole memory on a used card", (4, 16384, 100), (1, 1, 0), _ask(percent=100), Reason.MEMORY),
    ("half the memory", (4, 16384, 100), (1, 8192, 0), _ask(percent=50, cores=10), None),
    ("insufficient cores", (4, 16384, 100), (1, 1024, 60), _ask(1024, 50), Reason.CORES),
    ("memory before cores", (4, 1000, 100), (1, 900, 60), _ask(1024, 50), Reason.MEMORY),
    ("exclusive on a used card", (4, 16384, 100), (1, 1024, 0), _ask(1024, 100), Reason.EXCLUSIVE),
    ("exclusive on an empty card", (4, 16384, 100), (0, 0, 0), _ask(1024, 100), None),
    ("cores over 100 are 100", (4, 16384, 100), (0, 0, 0), _ask(1024, 150), None),
    ("150 cores on a used card", (4, 16384, 100), (1, 1, 0), _ask(1024, 150), Reason.EXCLUSIVE),
    ("exclusivity needs a 100-core total", (100, 32768, 16), (1, 1, 0), _ask(512, 16), None),
    ("16 cores of 16 used", (100, 32768, 16), (1, 1, 16), _ask(512, 1), Reason.CORES),
    ("compute exhausted", (4, 16384, 100), (1, 1024, 100), _ask(1024), Reason.NO_COMPUTE),
    ("cores before compute", (4, 16384, 100), (1, 1024, 100), _ask(1024, 1), Reason.CORES),
    ("no compute total", (4, 16384, 0), (1, 1024, 0), _ask(1024), None),
]


@pytest.mark.parametrize(
    ("total", "used", "ask", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_check_in_hamis_order(
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    expected: Reason | None,
) -> None:
    free = Capacity(total[0] - used[0], total[1] - used[1], total[2] - used[2])
    failing = first_failing(SHARE, free, Capacity(*total), ask)
    assert (failing.reason if failing is not None else None) is expected


@pytest.mark.parametrize("ask", sorted({c[3] for c in CASES}, key=repr), ids=repr)
def test_the_grid_agrees_with_each_device(ask: ContainerRequest) -> None:
    totals = np.array([[c[1] for c in CASES]], dtype=np.int64)
    used = np.array([[c[2] for c in CASES]], dtype=np.int64)
    total = Capacity(totals[..., 0], totals[..., 1], totals[..., 2])
    free = Capacity(*(totals[..., i] - used[..., i] for i in range(3)))
    within = np.ones((1, len(CASES)), dtype=np.bool_)
    grid = fitting_mask(SHARE, free, total, ask, within)[0].tolist()
    one_by_one = [
        first_failing(
            SHARE,
            Capacity(t[0] - u[0], t[1] - u[1], t[2] - u[2]),
            Capacity(*t),
            ask,
        )
        is None
        for _, t, u, _, _ in CASES
    ]
    assert grid == one_by_one


def test_a_share_takes_its_memory_and_at_most_100_cores() -> None:
    total = Capacity(4, 16384, 100)
    assert SHARE.consumed(total, _ask(2048, 150)) == Capacity(1, 2048, 100)
    assert SHARE.consumed(total, _ask(percent=25, cores=5)) == Capacity(1, 4096, 5)
    assert clamp_cores(101) == 100 and clamp_cores(7) == 7


def test_a_held_share_of_100_cores_is_exclusive() -> None:
    assert SHARE.held(DeviceUsage(memory_mib=1, cores=100, slots=1)).exclusive
    assert not SHARE.held(DeviceUsage(memory_mib=1, cores=99, slots=1)).exclusive


def test_no_pick_rule() -> None:
    assert SHARE.pick is None and not SHARE.pick_refuses


def _texts(stages: tuple[Stage, ...]) -> dict[Reason, str]:
    used, total = Capacity(3, 2048, 60), Capacity(4, 16384, 100)
    demand = HeldShare(slots=1, memory_mib=512, cores=10, exclusive=False)
    return {stage.reason: stage.misfit("gpu-0", used, total, demand) for stage in stages}


def test_each_vendor_refuses_in_its_own_words() -> None:
    generic = {
        Reason.SLOTS: "gpu-0 over-allocated: slots 3/4",
        Reason.MEMORY: "gpu-0 over-allocated: memory 2048/16384 MiB",
        Reason.CORES: "gpu-0 over-allocated: cores 60/100",
        Reason.EXCLUSIVE: "gpu-0 is in use by 2 allocation(s); "
        "a grant of all 100 cores needs an unused device",
        Reason.NO_COMPUTE: "gpu-0 has all cores in use (60/100); "
        "a grant with cores 0 cannot share it",
    }
    assert _texts(SHARE.stages) == generic
    assert _texts(ascend_share(DEFAULT_CHIPS[0]).stages) == {
        **generic,
        Reason.SLOTS: "gpu-0 over-allocated: vNPU slots 3/4",
        Reason.EXCLUSIVE: "gpu-0 is in use by 2 allocation(s); "
        "a grant of all 100 cores needs an unused npu",
    }
    assert _texts(AMD_SHARE.stages) == {
        Reason.SLOTS: generic[Reason.SLOTS],
        Reason.MEMORY: generic[Reason.MEMORY],
        Reason.CORES: "gpu-0 over-allocated: compute units 60/100",
        Reason.EXCLUSIVE: "gpu-0 is in use by 2 allocation(s); "
        "a grant of all compute units needs an unused gpu",
    }
    assert _texts(NEURON_SHARE.stages) == {
        Reason.SLOTS: "gpu-0 over-allocated: shares 3/4",
        Reason.EXCLUSIVE: "gpu-0 is in use by 2 allocation(s); a whole device needs an unused one",
        Reason.CORES: "gpu-0 over-allocated: neuron cores 60/100",
    }
    vxpu = _texts(VXPU_SHARE.stages)
    assert {reason: vxpu[reason] for reason in (Reason.SLOTS, Reason.MEMORY, Reason.CORES)} == {
        reason: generic[reason] for reason in (Reason.SLOTS, Reason.MEMORY, Reason.CORES)
    }
