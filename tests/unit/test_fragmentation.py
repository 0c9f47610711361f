"""The ``fragmentation`` (FGD) policy: F(m) by hand, the policy contract, device ranking.

Devices have 1000 MiB and 100 cores, so a device's free capacity ``g`` in milli is its
free cores x 10 (and its free MiB); nodes have 16 vCPU unless a case says otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.builders import make_index, make_node, make_request, use
from vgpu_extender.domain import ContainerRequest, PodRequest, Reason
from vgpu_extender.engine import ClusterIndex, NodeState, choose_devices
from vgpu_extender.engine.framework import Planner, ProfileConfig
from vgpu_extender.policies import default_profile
from vgpu_extender.policies.fragment_math import CompiledShapes, Devices, fragmentation
from vgpu_extender.policies.fragmentation import (
    Fragmentation,
    FragmentationArgs,
    build_fragmentation,
)
from vgpu_extender.policies.row_states import RowStates
from vgpu_extender.policies.typical_pods import (
    ShapeCounter,
    TypicalPod,
    WeightedShape,
    shapes_from_json,
    top_shapes,
)

T4 = "Tesla-T4"
G2 = "G2"


def gpu_node(
    name: str, free: list[int], *, cpu: int | None = 16_000, model: str = G2
) -> tuple[ClusterIndex, str]:
    """One node whose devices have ``free`` milli left (taken by one pod per device)."""
    index = make_index(
        make_node(name, len(free), mem=1000, cores=100, count=10, type=model, cpu_milli=cpu)
    )
    for i, g in enumerate(free):
        if g < 1000:
            used = 1000 - g
            use(index, f"{name}-held-{i}", name, [(i, used, used // 10)])
    return index, name


def shape(milli: int, count: int = 1, cpu: int = 0, types: tuple[str, ...] = ()) -> TypicalPod:
    return TypicalPod.from_milli(cpu_milli=cpu, gpu_milli=milli, count=count, types=types)


def frag_of(index: ClusterIndex, shapes: list[WeightedShape]) -> float:
    rows = index.rows_of(index.node_names())
    return float(fragmentation(Devices.of_rows(index, rows), CompiledShapes.of(shapes))[0])


# F(m) for a node with free CPU c, per-GPU free g_i and R = sum g_i (fgd.md §5):
#   m CPU-only, or a model m does not accept -> R; m fits -> sum of g_i < milli_m; else R.
FREE = [1000, 500, 200, 0]  # R = 1700
F_CASES = [
    pytest.param([(1.0, shape(300))], 200.0, id="fits: only the 200 left is too small"),
    pytest.param([(1.0, shape(600))], 700.0, id="fits on the whole gpu: 500 + 200 are fragments"),
    pytest.param([(1.0, shape(1000, count=2))], 1700.0, id="two whole gpus needed, one free: R"),
    pytest.param([(1.0, shape(300, cpu=20_000))], 1700.0, id="cpu too short: R"),
    pytest.param([(1.0, shape(0, cpu=1000))], 1700.0, id="cpu-only shape: R"),
    pytest.param([(1.0, shape(300, types=(T4,)))], 1700.0, id="model not accepted: R"),
    pytest.param([(1.0, shape(300, types=(G2, T4)))], 200.0, id="model accepted among several"),
    pytest.param([(0.5, shape(300)), (0.5, shape(600))], 450.0, id="weighted: 0.5*200 + 0.5*700"),
    pytest.param(
        [(0.25, shape(0)), (0.75, shape(300))],
        0.25 * 1700 + 0.75 * 200,
        id="cpu-only shapes count R at their weight",
    ),
]


@pytest.mark.parametrize(("shapes", "expected"), F_CASES)
def test_fragment_by_hand(shapes: list[WeightedShape], expected: float) -> None:
    index, _ = gpu_node("n", FREE)
    assert frag_of(index, shapes) == pytest.approx(expected)


def test_untracked_host_cpu_never_limits_a_shape() -> None:
    index, _ = gpu_node("n", FREE, cpu=None)  # UNLIMITED, as in the extender
    assert frag_of(index, [(1.0, shape(300, cpu=10**9))]) == pytest.approx(200.0)


def test_memory_only_requests_count_the_scarcer_resource() -> None:
    index = make_index(make_node("n", 1, mem=1000, cores=100, count=10, cpu_milli=16_000))
    use(index, "mem-only", "n", [(0, 700, 0)])  # 70 % of memory, no cores
    assert frag_of(index, [(1.0, shape(500))]) == pytest.approx(300.0)


# --------------------------------------------------------------------------- the policy
def policy(shapes: list[WeightedShape], *, quantize: bool = False) -> Fragmentation:
    return build_fragmentation(FragmentationArgs(typical_pods=tuple(shapes), quantize=quantize))


def two_nodes() -> ClusterIndex:
    """``a`` has a GPU with 300 free next to a free one; ``b`` is empty."""
    index = make_index(
        make_node("a", 2, mem=1000, cores=100, count=10, type=G2, cpu_milli=16_000),
        make_node("b", 2, mem=1000, cores=100, count=10, type=G2, cpu_milli=16_000),
    )
    use(index, "held", "a", [(0, 700, 70)])
    return index


SHARE_300 = make_request(1, pct=30, cores=30)
WHOLE = make_request(1, pct=100, cores=100)


def test_a_share_goes_where_it_fills_a_fragment() -> None:
    index = two_nodes()
    fgd = policy([(1.0, shape(500))])
    rows = index.rows_of(["a", "b"])
    scores = fgd.score_nodes(index, SHARE_300, rows)
    assert scores.shape == (2,)
    assert scores[0] > scores[1]  # on a: the 300 fragment disappears (delta 300 - 0)
    assert scores[0] == pytest.approx(300.0)


def test_scores_cover_every_feasible_row_in_order() -> None:
    index = two_nodes()
    fgd = policy([(1.0, shape(500))])
    rows = index.rows_of(["b", "a", "b"])
    scores = fgd.score_nodes(index, SHARE_300, rows)
    assert scores[0] == scores[2] and scores[1] > scores[0]


@pytest.mark.parametrize(
    ("request_", "expected_first"),
    [
        pytest.param(SHARE_300, 0, id="share fills the 300 left on gpu0"),
        pytest.param(make_request(1, pct=20, cores=20), 0, id="smaller share also packs gpu0"),
        pytest.param(WHOLE, 1, id="a whole gpu can only be gpu1"),
    ],
)
def test_device_ranking_minimises_fragmentation(request_: PodRequest, expected_first: int) -> None:
    index = two_nodes()
    fgd = policy([(1.0, shape(500))])
    chosen = choose_devices(index, request_, "a", fgd.rank_devices)
    assert not isinstance(chosen, type(None))
    assert chosen.containers[0][0].uuid == f"a-gpu{expected_first}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raw_devices", "expected_first"),
    [
        pytest.param(True, 1, id="raw change: gpu1 leaves 20, gpu0 would leave 30"),
        pytest.param(False, 0, id="paper: both score 57, the lowest index wins"),
    ],
)
def test_devices_are_told_apart_below_one_score_point(
    raw_devices: bool, expected_first: int
) -> None:
    # Free 330 and 320, typical pod 310, pod 300: F before 320 (gpu1 too small).
    # On gpu0 -> [30, 320]: F 30, delta 290. On gpu1 -> [330, 20]: F 20, delta 300.
    index, node = gpu_node("n", [330, 320])
    fgd = build_fragmentation(
        FragmentationArgs(typical_pods=((1.0, shape(310)),), raw_devices=raw_devices)
    )
    state = NodeState.of(index, index.row_of(node) or 0, SHARE_300)
    for scored_first in (False, True):  # fresh, and from what scoring the node worked out
        if scored_first:
            fgd.score_nodes(index, SHARE_300, index.rows_of([node]))
        ranked = fgd.rank_devices(state, SHARE_300.containers[0], [0, 1])
        assert ranked[0] == expected_first


def test_ranking_without_scoring_first_matches_ranking_after_scoring() -> None:
    index = two_nodes()
    scored, fresh = policy([(1.0, shape(500))]), policy([(1.0, shape(500))])
    scored.score_nodes(index, SHARE_300, index.rows_of(["a"]))
    state = NodeState.of(index, index.row_of("a") or 0, SHARE_300)
    container = SHARE_300.containers[0]
    assert scored.rank_devices(state, container, [0, 1]) == fresh.rank_devices(
        state, container, [0, 1]
    )


def test_quantized_scores_are_the_papers_integers() -> None:
    index = two_nodes()
    fgd = policy([(1.0, shape(500))], quantize=True)
    scores = fgd.score_nodes(index, SHARE_300, index.rows_of(["a", "b"]))
    # delta 300 on a: floor(100 * sigmoid(0.3)) = 57; b: no change in F: 50.
    assert scores.tolist() == [math.floor(100 / (1 + math.exp(-0.3))), 50.0]


def test_cpu_only_pods_are_scored_by_the_cpu_they_leave() -> None:
    index = make_index(
        make_node("tight", 1, mem=1000, cores=100, count=10, type=G2, cpu_milli=4_000),
        make_node("roomy", 1, mem=1000, cores=100, count=10, type=G2, cpu_milli=64_000),
    )
    fgd = policy([(1.0, shape(500, cpu=2_000))])
    cpu_pod = PodRequest(uid="cpu", containers=(ContainerRequest("c"),), cpu_milli=3_000)
    scores = fgd.score_nodes(index, cpu_pod, index.rows_of(["tight", "roomy"]))
    assert scores[1] > scores[0]  # on tight the typical pod no longer fits: F grows by R


def test_multi_gpu_pods_take_whole_devices_in_the_score() -> None:
    index = make_index(
        make_node("half", 4, mem=1000, cores=100, count=10, type=G2, cpu_milli=64_000),
        make_node("full", 4, mem=1000, cores=100, count=10, type=G2, cpu_milli=64_000),
    )
    use(index, "held", "half", [(0, 1000, 100)], [(1, 1000, 100)])
    fgd = policy([(0.5, shape(1000, count=2)), (0.5, shape(1000, count=4))])
    two_gpus = make_request(2, pct=100, cores=100)
    scores = fgd.score_nodes(index, two_gpus, index.rows_of(["half", "full"]))
    # half: 2 free, only the 2-gpu shape fits: F = 0.5 * 2000 = 1000; after: R = 0, F = 0.
    # full: F = 0; after, 2 free: F = 0.5 * 2000 = 1000. Deltas +1000 and -1000.
    assert scores.tolist() == pytest.approx([1000.0, -1000.0])


def test_learning_policy_starts_from_a_prior_and_learns() -> None:
    fgd = build_fragmentation(FragmentationArgs())
    assert fgd.learner is not None
    before = fgd.compiled()
    assert len(before.weight) == 3  # the prior: whole, half, quarter
    for _ in range(50):
        fgd.observe(make_request(1, pct=80, cores=80))
    after = fgd.compiled()
    assert after is not before
    biggest = after.classes[int(np.argmax(after.by_class.sum(axis=1)))]
    assert biggest.container.cores == 80


# --------------------------------------------------------------------------- typical pods
def test_top_shapes_keep_95_percent_and_renormalise() -> None:
    counts = {shape(100): 50.0, shape(200): 30.0, shape(300): 16.0, shape(400): 4.0}
    kept = top_shapes(counts)
    assert [s.cores for _, s in kept] == [10, 20, 30]
    assert sum(w for w, _ in kept) == pytest.approx(1.0)
    assert kept[0][0] == pytest.approx(50 / 96)


def test_equal_counts_keep_the_larger_shape_first() -> None:
    kept = top_shapes({shape(100): 5.0, shape(900): 5.0}, coverage=0.5)
    assert [s.cores for _, s in kept] == [90]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "non-empty JSON list", id="empty"),
        pytest.param([{"weight": 0, "gpu_milli": 500}], "weight", id="zero weight"),
        pytest.param([{"weight": 1, "gpu_milli": 500, "colour": 1}], "colour", id="unknown field"),
        pytest.param([{"weight": 1, "cores": 150, "count": 1}], "percentages", id="cores > 100"),
        pytest.param([{"weight": 1, "types": "T4", "count": 1}], "types", id="types not a list"),
    ],
)
def test_typical_pods_file_errors_name_the_field(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        shapes_from_json(data)


def test_typical_pods_file_in_trace_units() -> None:
    shapes = shapes_from_json(
        [{"weight": 3, "gpu_milli": 500, "cpu_milli": 4000}, {"weight": 1, "types": ["T4"]}]
    )
    assert shapes[0] == (0.75, TypicalPod(cpu_milli=4000, count=1, memory_percent=50, cores=50))
    assert shapes[1] == (0.25, TypicalPod(types=("t4",)))


def test_shape_counter_forgets_the_rarest_beyond_its_bound() -> None:
    counter = ShapeCounter(prior=(), max_shapes=2)
    for milli in (100, 100, 200, 300):
        counter.add(shape(milli))
    assert {s.cores for _, s in counter.distribution()} <= {10, 30}


# --------------------------------------------------------------------------- equal nodes
def test_row_states_group_equal_nodes_and_follow_changes() -> None:
    index = two_nodes()
    states = RowStates()
    rows = index.rows_of(["a", "b"])
    first, inverse = states.group(index, rows)
    assert len(first) == 2
    use(index, "b-held", "b", [(0, 700, 70)])
    first, inverse = states.group(index, rows)
    assert len(first) == 1 and inverse.tolist() == [0, 0]


# --------------------------------------------------------------------------- replay needs
def test_host_only_pods_meet_node_resources_fit_and_the_node_policy() -> None:
    index = make_index(
        make_node("small", 1, mem=1000, cores=100, count=10, type=G2, cpu_milli=2_000),
        make_node("big", 1, mem=1000, cores=100, count=10, type=G2, cpu_milli=64_000),
    )
    cpu_pod = PodRequest(uid="cpu", containers=(ContainerRequest("c"),), cpu_milli=3_000)
    args = {"fragmentation": FragmentationArgs(typical_pods=((1.0, shape(500, cpu=2_000)),))}
    config = ProfileConfig(
        node_score="fragmentation", device_rank="fragmentation", score_unmanaged=True
    )
    planner = Planner(index, default_profile(config, args))
    result = planner.filter(cpu_pod, ["small", "big"])
    assert result.feasible == ["big"]
    assert result.rejections["small"].reason is Reason.CPU
    quiet = planner.filter(cpu_pod, ["small", "big"], explain=False)
    assert quiet.feasible == ["big"] and quiet.rejections == {}
    scores = planner.scores(cpu_pod, index.rows_of(["small", "big"]))
    assert not np.isnan(scores).any()  # scored by the node policy, not the label fallback
