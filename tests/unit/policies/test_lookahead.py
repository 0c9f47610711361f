"""The ``lookahead`` policy: FGD's integer score plus one typical pod of outlook, by hand.

Devices have 1000 MiB and 100 cores, so a device's free capacity in milli is its free
cores x 10; nodes have 16 vCPU, typical shapes ask for no host CPU unless a case says so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.builders import make_index, make_node, make_request, use
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import ArgumentError, Planner, ProfileConfig
from vgpu_extender.policies import BUILTIN, default_profile
from vgpu_extender.policies.fragment_math import (
    ClassStats,
    CompiledShapes,
    Devices,
    one_device_after,
)
from vgpu_extender.policies.fragmentation import FragmentationArgs, build_fragmentation
from vgpu_extender.policies.lookahead import Lookahead, LookaheadArgs, Outlook, build_lookahead
from vgpu_extender.policies.typical_pods import TypicalPod, WeightedShape

G2 = "G2"


def shape(milli: int, count: int = 1, cpu: int = 0) -> TypicalPod:
    return TypicalPod.from_milli(cpu_milli=cpu, gpu_milli=milli, count=count)


def paper(delta: float) -> int:
    return math.floor(100 / (1 + math.exp(-delta / 1000)))


def nodes(*free: list[int], cpu: int = 16_000) -> ClusterIndex:
    """Node ``n<i>`` has devices with ``free[i]`` milli left."""
    index = make_index(
        *(
            make_node(f"n{i}", len(f), mem=1000, cores=100, count=10, type=G2, cpu_milli=cpu)
            for i, f in enumerate(free)
        )
    )
    for i, f in enumerate(free):
        for j, g in enumerate(f):
            if g < 1000:
                use(index, f"held-{i}-{j}", f"n{i}", [(j, 1000 - g, (1000 - g) // 10)])
    return index


def lookahead(shapes: list[WeightedShape], **kw: float | int) -> Lookahead:
    return build_lookahead(LookaheadArgs(typical_pods=tuple(shapes), **kw))  # type: ignore[arg-type]


HALF_650_HALF_320: list[WeightedShape] = [(0.5, shape(650)), (0.5, shape(320))]
SHARE_320 = make_request(1, pct=32, cores=32)


def test_a_share_leaves_room_for_the_next_typical_pod() -> None:
    # n0: one GPU with 530 free (a 470 on it); n1: one free GPU. Typical: 650 and 320, 1/2 each.
    # F = R - sum p_m [m fits] Q_m:  F(530) = 530 - 0.5*530 = 265;  F(1000) = 0;
    #   F(210) = 210;  F(680) = 0;  F(350) = 175;  F(360) = 180;  F(30) = 30.
    # FGD, the 320 pod: n0 -> 210: delta 55, score 51;  n1 -> 680: delta 0, score 50.
    # Best change per shape before: 650 only on n1 (-175, nowhere else);
    #   320: n0 55 (alone), n1 0.
    # Outlook L = sum_m p_m [max(after here, best elsewhere) - best before]:
    #   on n0 -> 210: 650 still -175 on n1 (+0); 320: nothing here, best elsewhere now 0
    #     (n1), 0 - 55 = -55.  L = 0.5 * -55 = -27.5 milli, round(-27.5 / 40) = -1 point.
    #   on n1 -> 680: 650 fits here: 680 -> 30, delta -30 (was -175 on n1 alone): +145;
    #     320 still 55 on n0: +0.  L = 0.5 * 145 = 72.5 milli, round(72.5 / 40) = +2 points.
    index = nodes([530], [1000])
    rows = index.rows_of(["n0", "n1"])
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(HALF_650_HALF_320)))
    assert fgd.score_nodes(index, SHARE_320, rows).tolist() == [paper(55), paper(0)] == [51, 50]
    ahead = lookahead(HALF_650_HALF_320)
    assert ahead.score_nodes(index, SHARE_320, rows).tolist() == [51 - 1, 50 + 2]


def test_the_weight_scales_the_outlook_and_zero_is_fgd() -> None:
    index = nodes([530], [1000])
    rows = index.rows_of(["n0", "n1"])
    # weight 2: round(-55 / 40) = -1 on n0 (-1.375), round(145 / 40) = 4 on n1 (3.625).
    assert lookahead(HALF_650_HALF_320, weight=2.0).score_nodes(
        index, SHARE_320, rows
    ).tolist() == [51 - 1, 50 + 4]
    assert lookahead(HALF_650_HALF_320, weight=0.0).score_nodes(
        index, SHARE_320, rows
    ).tolist() == [51, 50]


def test_nodes_outside_the_window_keep_fgds_score_less_the_beams_worst() -> None:
    # window 0: only n0 (score 51) looks ahead (-1); n1 gets min(0, -1) = -1 too.
    index = nodes([530], [1000])
    scores = lookahead(HALF_650_HALF_320, window=0.0).score_nodes(
        index, SHARE_320, index.rows_of(["n0", "n1"])
    )
    assert scores.tolist() == [50, 49]


def test_pods_of_several_devices_are_scored_as_fgd_scores_them() -> None:
    index = nodes([1000, 1000, 0, 0], [1000, 1000, 1000, 1000])
    rows = index.rows_of(["n0", "n1"])
    shapes = [(0.5, shape(1000, count=2)), (0.5, shape(1000))]
    two = make_request(2, pct=100, cores=100)
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(shapes)))
    assert (
        lookahead(shapes).score_nodes(index, two, rows).tolist()
        == fgd.score_nodes(index, two, rows).tolist()
    )


def test_best_changes_are_fgds_change_for_each_shape() -> None:
    # The shared arithmetic per class against one_device_after shape by shape; one
    # shape needs more host CPU than n1 has left.
    index = make_index(
        make_node("n0", 2, mem=1000, cores=100, count=10, type=G2, cpu_milli=16_000),
        make_node("n1", 2, mem=1000, cores=100, count=10, type=G2, cpu_milli=3_000),
    )
    use(index, "h0", "n0", [(0, 470, 47)])
    use(index, "h1", "n1", [(1, 810, 81)])
    shapes = [(0.4, shape(320)), (0.3, shape(320, cpu=4_000)), (0.3, shape(1000))]
    compiled = CompiledShapes.of(shapes)
    d = Devices.of_rows(index, index.rows_of(["n0", "n1"]))
    got = Outlook.of(compiled).best_changes(d, compiled)
    stats = ClassStats.of(d, compiled)
    before = stats.fragmentation(compiled, d.cpu)
    for m, (_, s) in enumerate(shapes):
        after = one_device_after(d, compiled, stats, s.container(), d.cpu - s.cpu_milli)
        change = np.where(np.isnan(after), -np.inf, before[:, None] - after)
        expected = np.where(d.cpu >= s.cpu_milli, change.max(axis=1), -np.inf)
        assert got[:, m].tolist() == pytest.approx(expected.tolist())
    assert got[1, 1] == -np.inf  # 4 vCPU asked, 3 free


def test_kept_outlooks_follow_the_cluster() -> None:
    # The same policy across placements must score as a fresh one does on the new state.
    index = nodes([530, 1000], [1000, 1000], [680])
    rows = index.rows_of(["n0", "n1", "n2"])
    kept = lookahead(HALF_650_HALF_320)
    kept.score_nodes(index, SHARE_320, rows)
    use(index, "next", "n1", [(0, 320, 32)])
    assert (
        kept.score_nodes(index, SHARE_320, rows).tolist()
        == lookahead(HALF_650_HALF_320).score_nodes(index, SHARE_320, rows).tolist()
    )


def test_the_device_choice_follows_the_raw_change_on_the_chosen_node() -> None:
    # n0: 330 and 320 free, typical 310 (fragmentation's case): gpu1 leaves 20, gpu0 30.
    index = nodes([330, 320])
    shapes = [(1.0, shape(310))]
    policy = lookahead(shapes)
    share_300 = make_request(1, pct=30, cores=30)
    policy.score_nodes(index, share_300, index.rows_of(["n0"]))
    state = NodeState.of(index, index.row_of("n0") or 0, share_300)
    assert policy.rank_devices(state, share_300.containers[0], [0, 1])[0] == 1


def test_registered_and_served_by_the_planner() -> None:
    assert BUILTIN["lookahead"].args is LookaheadArgs
    index = nodes([530], [1000])
    args = {"lookahead": LookaheadArgs(typical_pods=tuple(HALF_650_HALF_320))}
    config = ProfileConfig(node_score="lookahead", device_rank="lookahead")
    best = Planner(index, default_profile(config, args)).best(SHARE_320, ["n0", "n1"])
    assert isinstance(best, tuple) and best[0] == "n1"


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        pytest.param({"weight": -1.0}, "weight", id="negative weight"),
        pytest.param({"window": "2"}, "window", id="window not a number"),
        pytest.param({"beam": 0}, "beam", id="empty beam"),
        pytest.param({"beam": True}, "beam", id="bool beam"),
        pytest.param({"host_pack": 1.5}, "host_pack", id="fragmentation's own checks"),
    ],
)
def test_bad_arguments_name_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ArgumentError, match=field):
        LookaheadArgs(**kw)  # type: ignore[arg-type]
