"""The exact device choice on one node, and the scaling of scores to 0..10."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.builders import (
    make_container,
    make_index,
    make_node,
    make_request,
    slot_indices,
    use,
)
from vgpu_extender.domain import (
    ContainerRequest,
    NodeInventory,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
)
from vgpu_extender.engine import (
    DeviceRanker,
    NodeState,
    by_index,
    choose_devices,
    to_extender_scores,
)
from vgpu_extender.policies.usage import binpack, spread
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

Grant = tuple[int, int, int]


def reverse_index(
    state: NodeState, container: ContainerRequest, candidates: Sequence[int]
) -> list[int]:
    """A ranker that prefers the highest device index."""
    return sorted(candidates, key=lambda s: -state.devices[s].index)


@dataclass
class Case:
    node: NodeInventory
    request: PodRequest
    #: Device indices per container, or the expected rejection (reason, unresolvable).
    expect: list[list[int]] | tuple[Reason, bool]
    held: Sequence[Sequence[Sequence[Grant]]] = field(default_factory=tuple)
    ranker: DeviceRanker = by_index


FULL = (8192, 100)

CASES = [
    pytest.param(
        Case(make_node("a", 4), make_request(2, mem=1000), [[0, 1]]), id="lowest-index-first"
    ),
    pytest.param(
        Case(make_node("a", 4), make_request(2, mem=1000), [[3, 2]], ranker=reverse_index),
        id="ranker-order-is-kept",
    ),
    pytest.param(
        Case(
            make_node("a", 3),
            make_request(1, mem=1000, cores=10),
            # spread: device 1 holds nothing, so its score is lowest:
            # 10*(1/10 + 10/100 + 1000/8192) = 3.22 against 5.6 and more for 0 and 2.
            [[1]],
            held=[[[(0, 2000, 20)]], [[(2, 4000, 20)]]],
            ranker=spread().rank_devices,
        ),
        id="spread-picks-the-emptiest",
    ),
    pytest.param(
        Case(
            make_node("a", 3),
            make_request(1, mem=1000, cores=10),
            # binpack: device 2 is fullest: 10*(2/10 + 30/100 + 5000/8192) = 11.1.
            [[2]],
            held=[[[(0, 2000, 20)]], [[(2, 4000, 20)]]],
            ranker=binpack().rank_devices,
        ),
        id="binpack-picks-the-fullest",
    ),
    pytest.param(
        Case(
            make_node("a", 2),
            make_request(2, mem=5000),
            # Device 1 has 8192 - 4000 = 4192 MiB: a second share cannot go on device 0 again.
            (Reason.MEMORY, False),
            held=[[[(1, 4000, 10)]]],
        ),
        id="a-gpu-at-most-once-per-container",
    ),
    pytest.param(
        Case(
            make_node("a", 1),
            make_request(
                containers=[
                    make_container(1, mem=3000, cores=30, name="x"),
                    make_container(1, mem=3000, cores=30, name="y"),
                ]
            ),
            [[0], [0]],
        ),
        id="containers-share-a-gpu",
    ),
    pytest.param(
        Case(
            make_node("a", 2),
            make_request(1, mem=100, cores=100),
            [[1]],
            held=[[[(0, 100, 1)]]],
        ),
        id="exclusive-skips-used-device",
    ),
    pytest.param(
        Case(
            make_node("a", 1),
            make_request(
                containers=[
                    make_container(1, mem=100, cores=100, name="x"),
                    make_container(1, mem=100, cores=0, name="y"),
                ]
            ),
            # x holds all 100 cores, so y (asking for none) cannot share the device.
            (Reason.NO_COMPUTE, False),
        ),
        id="exclusive-then-zero-cores",
    ),
    pytest.param(
        Case(
            make_node("a", 1, count=1),
            make_request(
                containers=[
                    make_container(1, mem=10, name="x"),
                    make_container(1, mem=10, name="y"),
                ]
            ),
            (Reason.SLOTS, False),
        ),
        id="split-count-caps-allocations",
    ),
    pytest.param(
        Case(
            make_node("a", 4, numa=[0, 0, 1, 1]),
            make_request(2, mem=1000, numa_bind=True),
            [[0, 1]],
        ),
        id="numa-first-node",
    ),
    pytest.param(
        Case(
            make_node("a", 4, numa=[0, 0, 1, 1]),
            make_request(2, mem=1000, numa_bind=True),
            # Device 1 is full: NUMA node 0 has one device left, so both go to node 1.
            [[2, 3]],
            held=[[[(1, *FULL)]]],
        ),
        id="numa-skips-a-short-node",
    ),
    pytest.param(
        Case(
            make_node("a", 4, numa=[0, 1, 0, 1]),
            make_request(2, mem=1000, numa_bind=True),
            # The ranker puts device 3 (NUMA 1) first; its NUMA node keeps the ranker's order.
            [[3, 1]],
            ranker=reverse_index,
        ),
        id="numa-best-ranked-decides",
    ),
    pytest.param(
        Case(
            make_node("a", 2, numa=[0, 1]),
            make_request(2, mem=1000, numa_bind=True),
            (Reason.NUMA, False),
        ),
        id="numa-impossible",
    ),
    pytest.param(
        Case(
            make_node("a", 2),
            make_request(
                containers=[
                    make_container(2, mem=6000, cores=60, init=True, name="init"),
                    make_container(1, mem=5000, cores=30, name="x"),
                    make_container(1, mem=3000, cores=30, name="y"),
                ]
            ),
            # The init container is sized against the empty node; x and y accumulate:
            # device 0 has 8192 - 5000 = 3192 >= 3000 MiB left for y.
            [[0, 1], [0], [0]],
        ),
        id="init-sized-against-node-before-pod",
    ),
    pytest.param(
        Case(
            make_node("a", 3),
            make_request(1, mem=100, use_uuids=["a-gpu2"]),
            [[2]],
        ),
        id="uuid-selector",
    ),
    pytest.param(
        Case(make_node("a", 2), make_request(3, mem=100), (Reason.NOT_ENOUGH_DEVICES, True)),
        id="not-enough-devices",
    ),
    pytest.param(
        Case(
            make_node("a", 1, cpu_milli=1000),
            make_request(1, mem=100, cpu_milli=2000),
            (Reason.CPU, False),
        ),
        id="host-cpu",
    ),
    pytest.param(
        Case(make_node("a", 2, problem="unreadable"), make_request(1), (Reason.INVENTORY, True)),
        id="inventory-problem",
    ),
    pytest.param(
        Case(
            make_node("a", 4, unhealthy=[2, 3]),
            make_request(
                containers=[
                    make_container(2, mem=100, cores=100, name="x"),
                    make_container(2, mem=100, cores=100, name="y"),
                ]
            ),
            # x takes both healthy devices; the reason for y is their use, not the two
            # devices that are unhealthy anyway.
            (Reason.EXCLUSIVE, False),
        ),
        id="reason-names-the-devices-in-use",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_choose_devices(case: Case) -> None:
    index = make_index(case.node)
    for i, containers in enumerate(case.held):
        use(index, f"held{i}", "a", *containers)
    verdict = choose_devices(index, case.request, "a", case.ranker)
    if isinstance(case.expect, tuple):
        assert isinstance(verdict, Rejection), verdict
        assert (verdict.reason, verdict.unresolvable) == case.expect
        return
    assert isinstance(verdict, PodAssignment), verdict.message(NVIDIA_WORDING)
    assert slot_indices(verdict) == case.expect
    assert verdict.init == tuple(c.init for c in case.request.containers)
    # What the engine chose can always be applied.
    index.apply("chosen", verdict)


def test_grants_carry_the_share_on_each_device() -> None:
    index = make_index(make_node("a", 2, mem=[8192, 16384]))
    request = make_request(
        containers=[
            make_container(0, name="sidecar"),
            make_container(2, pct=25, cores=10, name="main"),
        ]
    )
    verdict = choose_devices(index, request, "a")
    assert isinstance(verdict, PodAssignment)
    # 25 % of 8192 = 2048 and of 16384 = 4096; the sidecar keeps its (empty) position.
    assert verdict.containers[0] == ()
    assert [(g.uuid, g.memory_mib, g.cores) for g in verdict.containers[1]] == [
        ("a-gpu0", 2048, 10),
        ("a-gpu1", 4096, 10),
    ]


def test_unknown_node() -> None:
    verdict = choose_devices(make_index(make_node("a", 1)), make_request(1), "ghost")
    assert verdict == Rejection(Reason.UNKNOWN_NODE, unresolvable=True)


def test_choice_does_not_touch_the_index() -> None:
    index = make_index(make_node("a", 2))
    before = index.cols.mem_free.copy()
    assert isinstance(choose_devices(index, make_request(2, mem=1000), "a"), PodAssignment)
    np.testing.assert_array_equal(index.cols.mem_free, before)


def test_node_state_fits() -> None:
    index = make_index(make_node("a", 3, count=2, unhealthy=[2]))
    use(index, "p", "a", [(0, 8000, 50)], [(1, 100, 10)], [(1, 100, 10)])
    state = NodeState.of(index, index.row_of("a") or 0)
    share = make_container(1, mem=500, cores=10)
    # Device 0: 192 MiB free; device 1: both slots taken; device 2: unhealthy.
    assert [state.fits(s, share) for s in range(3)] == [
        Reason.MEMORY,
        Reason.SLOTS,
        Reason.UNHEALTHY,
    ]
    assert state.fits(0, make_container(1, mem=100, cores=60)) is Reason.CORES
    assert state.fits(0, make_container(1, mem=100, cores=100)) is Reason.EXCLUSIVE


def test_ranker_sees_a_copy() -> None:
    index = make_index(make_node("a", 2))
    seen: list[list[int]] = []

    def spy(state: NodeState, container: ContainerRequest, candidates: Sequence[int]) -> list[int]:
        seen.append(list(state.mem_free))
        return list(candidates)

    request = make_request(
        containers=[make_container(1, mem=1000, name="x"), make_container(1, mem=2000, name="y")]
    )
    assert isinstance(choose_devices(index, request, "a", spy), PodAssignment)
    # The second container sees the first one's share taken from device 0.
    assert seen == [[8192, 8192], [7192, 8192]]


SCALE_CASES = [
    ([], []),
    ([1.0, 2.0, 3.0], [0, 5, 10]),
    ([30.0, 0.0, 10.0], [10, 0, 3]),  # 10/30*10 = 3.33 -> 3
    ([5.0, 5.0], [10, 10]),  # equal: none is preferred
    # NaN counts as the worst, below the lowest scored node: 1..10 beside it.
    ([float("nan"), 1.0, 2.0], [0, 1, 10]),
    ([float("nan"), 1.0, 2.0, 3.0], [0, 1, 6, 10]),  # 1 + 1/2*9 = 5.5 -> 6
    ([float("nan"), float("nan")], [0, 0]),
    ([-2.0, float("inf"), -1.0], [0, 10, 10]),  # +inf clips to the best finite score
    ([1e6, 2e6, 1.5e6], [0, 10, 5]),  # raw label values never leave unscaled
]


@pytest.mark.parametrize(
    ("raw", "scaled"),
    SCALE_CASES,
    ids=[
        "empty",
        "linear",
        "rounding",
        "flat",
        "nan-worst",
        "nan-worst-midpoint",
        "all-nan",
        "inf",
        "large-values",
    ],
)
def test_to_extender_scores(raw: list[float], scaled: list[int]) -> None:
    out = to_extender_scores(np.array(raw, dtype=np.float64))
    assert out == scaled
    assert all(isinstance(v, int) and 0 <= v <= 10 for v in out)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
        max_size=40,
    )
)
def test_finite_scores_scale_min_max_as_written(raw: list[float]) -> None:
    # The plain formula, value by value: the vectorised fast path must agree exactly.
    out = to_extender_scores(np.array(raw, dtype=np.float64))
    if not raw:
        assert out == []
        return
    low, high = min(raw), max(raw)
    if high <= low:
        assert out == [10] * len(raw)
    else:
        assert out == [int(np.rint((v - low) * 10 / (high - low))) for v in raw]
