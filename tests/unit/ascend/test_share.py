"""The NPU share stages (HAMi's per-device Fit checks 4-11, in its order) on single
devices and the same verdicts on a NumPy grid, what a share takes, and the topology pick
(HAMi's NetworkID and 910C pairing cases, and the best-fit ring choice that improves on
HAMi's "largest ring first")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vgpu_extender.domain import ContainerRequest, Device, DeviceUsage, Reason
from vgpu_extender.domain.share import Capacity
from vgpu_extender.engine.rules import cumulative_masks, first_failing
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS
from vgpu_extender.vendors.ascend.share import (
    ascend_share,
    pick_910c,
    pick_by_network,
)

CHIPS = {chip.common_word: chip for chip in DEFAULT_CHIPS}
SHARE = ascend_share(CHIPS["Ascend910B3"])


def _ask(memory: int = 0, cores: int = 0, percent: int = 0) -> ContainerRequest:
    return ContainerRequest(
        "c", count=1, memory_mib=memory, memory_percent=percent, cores=cores, vendor="Ascend910B3"
    )


#: (case, total (slots, memory, cores), used (slots, memory, cores), ask, first failure)
CASES = [
    ("fits a vNPU", (4, 65536, 20), (1, 16384, 0), _ask(16384), None),
    ("slots exhausted", (4, 65536, 20), (4, 16384, 0), _ask(1024), Reason.SLOTS),
    ("slots before memory", (1, 100, 20), (1, 100, 0), _ask(1024), Reason.SLOTS),
    ("insufficient memory", (4, 65536, 20), (1, 60000, 0), _ask(16384), Reason.MEMORY),
    ("whole card on a used card", (4, 65536, 20), (1, 16384, 0), _ask(percent=100), Reason.MEMORY),
    ("whole card on an empty card", (4, 65536, 20), (0, 0, 0), _ask(percent=100), None),
    ("insufficient cores", (4, 65536, 100), (1, 1024, 60), _ask(1024, 50), Reason.CORES),
    ("memory before cores", (4, 1000, 100), (1, 900, 60), _ask(1024, 50), Reason.MEMORY),
    ("exclusive on a used card", (4, 65536, 100), (1, 1024, 0), _ask(1024, 100), Reason.EXCLUSIVE),
    ("exclusive on an empty card", (4, 65536, 100), (0, 0, 0), _ask(1024, 100), None),
    ("cores over 100 are 100", (4, 65536, 100), (0, 0, 0), _ask(1024, 150), None),
    ("150 cores on a used card", (4, 65536, 100), (1, 1, 0), _ask(1024, 150), Reason.EXCLUSIVE),
    ("100 cores where total is not 100", (4, 65536, 200), (1, 1, 0), _ask(1, 100), None),
    ("compute exhausted", (4, 65536, 100), (1, 1024, 100), _ask(1024), Reason.NO_COMPUTE),
    ("cores before compute", (4, 65536, 100), (1, 1024, 100), _ask(1024, 1), Reason.CORES),
    ("no compute total", (4, 65536, 0), (1, 1024, 0), _ask(1024), None),
    ("hard split cores stay free", (4, 65536, 20), (3, 49152, 0), _ask(16384), None),
]


def _capacities(
    total: tuple[int, int, int], used: tuple[int, int, int]
) -> tuple[Capacity, Capacity]:
    free = Capacity(total[0] - used[0], total[1] - used[1], total[2] - used[2])
    return free, Capacity(*total)


@pytest.mark.parametrize(("case", "total", "used", "ask", "want"), CASES, ids=[c[0] for c in CASES])
def test_stages_on_one_device(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    free, whole = _capacities(total, used)
    stage = first_failing(SHARE, free, whole, ask)
    assert (None if stage is None else stage.reason) == want


@pytest.mark.parametrize("ask", sorted({c[3] for c in CASES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    totals = np.array([[c[1] for c in CASES]], dtype=np.int64)
    used = np.array([[c[2] for c in CASES]], dtype=np.int64)
    free_grid = Capacity(*(totals[..., i] - used[..., i] for i in range(3)))
    total_grid = Capacity(*(totals[..., i] for i in range(3)))
    within = np.ones((1, len(CASES)), dtype=np.bool_)
    stages, masks = cumulative_masks(SHARE, free_grid, total_grid, ask, within)
    for cell, (_, total, used_one, _, _) in enumerate(CASES):
        on_grid = next(
            (s.reason for s, m in zip(stages, masks, strict=True) if not m[0, cell]), None
        )
        free, whole = _capacities(total, used_one)
        one = first_failing(SHARE, free, whole, ask)
        assert on_grid == (None if one is None else one.reason), CASES[cell][0]


def test_stage_order_is_hamis() -> None:
    assert [stage.reason for stage in SHARE.stages] == [
        Reason.SLOTS,
        Reason.MEMORY,
        Reason.CORES,
        Reason.EXCLUSIVE,
        Reason.NO_COMPUTE,
    ]
    assert SHARE.noun == "npu"
    assert SHARE.name == "Ascend910B3"


def test_consumed_and_held() -> None:
    total = Capacity(4, 65536, 100)
    assert SHARE.consumed(total, _ask(16384, 30)) == Capacity(1, 16384, 30)
    assert SHARE.consumed(total, _ask(percent=100)) == Capacity(1, 65536, 0)
    assert SHARE.consumed(total, _ask(1, 150)) == Capacity(1, 1, 100)
    held = SHARE.held(DeviceUsage(memory_mib=3024, cores=65, slots=1))
    assert (held.slots, held.memory_mib, held.cores, held.exclusive) == (1, 3024, 65, False)
    assert SHARE.held(DeviceUsage(memory_mib=1, cores=100, slots=1)).exclusive


def test_hami_add_resource_usage_literal() -> None:
    # Usage {0 used, 15 cores, 2000 MiB} plus a share of 50 cores and 1024 MiB.
    used = Capacity(0, 2000, 15)
    taken = SHARE.consumed(Capacity(4, 65536, 100), _ask(1024, 50))
    after = Capacity(*(u + t for u, t in zip(used, taken, strict=True)))
    assert after == Capacity(1, 3024, 65)


def test_misfit_texts_name_numbers_and_no_percent_sign() -> None:
    used, total = Capacity(5, 70000, 120), Capacity(4, 65536, 100)
    for stage in SHARE.stages:
        text = stage.misfit("npu d0 on node n", used, total, _ask(1, 100))
        assert text.startswith("npu d0 on node n")
        assert "%" not in text


# -- the topology pick ---------------------------------------------------------------


def _npu(uuid: str, index: int = 0, network: int | float | None = None) -> Device:
    info = () if network is None else (("NetworkID", network),)
    return Device(uuid, index=index, vendor="Ascend910B3", custom_info=info)


def _uuids(fitting: list[Device], picked: tuple[int, ...] | None) -> list[str] | None:
    return None if picked is None else [fitting[i].uuid for i in picked]


def test_hami_schedule_by_network_id() -> None:
    # HAMi walks the sorted devices backwards: dev-2, dev-1, dev-0.
    fitting = [_npu("dev-2", 2, 1), _npu("dev-1", 1, 1), _npu("dev-0", 0, 0)]
    assert _uuids(fitting, pick_by_network(fitting, 2)) == ["dev-2", "dev-1"]


def test_a_request_no_ring_holds_fills_both_rings_largest_first() -> None:
    fitting = [_npu("a", 0, 0), _npu("b", 4, 1), _npu("c", 5, 1), _npu("d", 1, 0), _npu("e", 6, 1)]
    assert _uuids(fitting, pick_by_network(fitting, 4)) == ["b", "c", "e", "a"]


def _rings(*sizes: int) -> list[Device]:
    """Fitting NPUs in policy order: ring 0's first, then ring 1's, and so on."""
    return [
        _npu(f"r{ring}-{i}", 4 * ring + i, ring)
        for ring, size in enumerate(sizes)
        for i in range(size)
    ]


def _rings_of(fitting: list[Device], picked: tuple[int, ...] | None) -> list[int]:
    assert picked is not None
    return [int(fitting[i].custom("NetworkID") or 0) for i in picked]


def test_best_fit_takes_the_ring_that_leaves_the_fewest_stranded() -> None:
    # Ring 0 has 4 fitting NPUs, ring 1 has 2. HAMi fills from ring 0 (the most
    # fitting); best fit takes ring 1 and keeps ring 0 whole for a 4-chip request.
    fitting = _rings(4, 2)
    assert _rings_of(fitting, pick_by_network(fitting, 2)) == [1, 1]
    assert _rings_of(fitting, pick_by_network(fitting, 1)) == [1]
    assert _rings_of(fitting, pick_by_network(fitting, 3)) == [0, 0, 0]
    assert _rings_of(fitting, pick_by_network(fitting, 4)) == [0, 0, 0, 0]


def test_a_single_npu_goes_where_it_strands_least_not_first_in_policy_order() -> None:
    fitting = [_npu("a", 0, 0), _npu("b", 1, 0), _npu("c", 4, 1)]
    assert _uuids(fitting, pick_by_network(fitting, 1)) == ["c"]


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_a_request_one_ring_holds_is_never_split(count: int) -> None:
    for sizes in ((4, 4), (4, 3), (3, 4), (2, 4), (4, 1), (1, 4), (4, 3, 4)):
        fitting = _rings(*sizes)
        picked = pick_by_network(fitting, count)
        assert picked is not None and len(picked) == count
        assert len(set(_rings_of(fitting, picked))) == 1, (sizes, count)
        left = [size for size in sizes if size >= count]
        # The ring taken is the tightest that holds it.
        assert sizes[_rings_of(fitting, picked)[0]] == min(left), (sizes, count)


def test_within_the_ring_the_policy_order_decides() -> None:
    fitting = [_npu("x", 5, 1), _npu("a", 0, 0), _npu("y", 4, 1), _npu("b", 1, 0), _npu("c", 2, 0)]
    assert _uuids(fitting, pick_by_network(fitting, 2)) == ["x", "y"]


def test_a_request_bigger_than_any_ring_fills_the_fewest_rings_best_fit() -> None:
    # Rings of 4, 4 and 3 for 6 NPUs: two rings; {4, 3} strands one NPU, {4, 4} two.
    fitting = _rings(4, 4, 3)
    assert _rings_of(fitting, pick_by_network(fitting, 6)) == [0, 0, 0, 0, 2, 2]
    # Rings of 1, 4, 4 and 3 for 8: the two rings of 4, none stranded.
    fitting = _rings(1, 4, 4, 3)
    assert _rings_of(fitting, pick_by_network(fitting, 8)) == [1] * 4 + [2] * 4
    # Rings of 2, 2 and 2 for 5: three rings, however they are taken.
    fitting = _rings(2, 2, 2)
    assert _rings_of(fitting, pick_by_network(fitting, 5)) == [0, 0, 1, 1, 2]


def test_many_rings_fall_back_to_the_largest_first() -> None:
    fitting = _rings(*([1] * 30), 2)
    picked = pick_by_network(fitting, 20)
    assert picked is not None and len(set(picked)) == 20
    assert _rings_of(fitting, picked)[:2] == [30, 30]


@pytest.mark.parametrize(
    ("indices", "count", "want"),
    [
        ((0, 1, 2, 4, 6), 4, None),
        ((0, 2), 2, None),
        ((0, 1), 2, [0, 1]),
        ((4, 0, 5, 1), 4, [4, 5, 0, 1]),
        ((0, 1, 2, 3), 2, [0, 1]),
        ((0, 1, 2, 3), 3, None),
        ((0, 1, 2), 1, [0]),
        ((5,), 1, [5]),
    ],
)
def test_910c_pairing(indices: tuple[int, ...], count: int, want: list[int] | None) -> None:
    for network in (0, None):  # the same rules with or without NetworkID
        fitting = [_npu(f"npu{i}", i, network) for i in indices]
        picked = pick_910c(fitting, count)
        assert (None if picked is None else [fitting[p].index for p in picked]) == want


def test_each_chip_gets_its_pick_rule() -> None:
    assert ascend_share(CHIPS["Ascend910C"]).pick is pick_910c
    assert ascend_share(CHIPS["Ascend910A"]).pick is pick_by_network
    assert ascend_share(CHIPS["Ascend910B4-1"]).pick is pick_by_network
    renamed = dataclasses.replace(CHIPS["Ascend910B3"], common_word="Ascend910B")
    assert ascend_share(renamed).pick is pick_by_network
    # No topology: the engine's first ``count`` in policy order, no exact choice.
    assert ascend_share(CHIPS["Ascend310P"]).pick is None


def test_only_910c_modules_refuse_sets() -> None:
    # The ring choice is a preference: counting fitting NPUs stays exact, so a node
    # the grid passes needs no exact choice; 910C's module rule can refuse one.
    assert ascend_share(CHIPS["Ascend910C"]).pick_refuses
    assert not ascend_share(CHIPS["Ascend910B3"]).pick_refuses
    assert not ascend_share(CHIPS["Ascend910A"]).pick_refuses
