"""``sum-squares`` and ``ss-lookahead``: the gap chosen by Sum-of-Squares, FGD's score
(and lookahead's outlook) within it, by hand.

Devices have 1000 MiB and 100 cores, so a device's free capacity (its gap) in milli is its
free cores x 10; nodes have 16 vCPU, typical shapes ask for no host CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.builders import make_index, make_node, make_request, use
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import ArgumentError, Planner, ProfileConfig
from vgpu_extender.policies import BUILTIN, default_profile
from vgpu_extender.policies.fragment_math import CompiledShapes
from vgpu_extender.policies.fragmentation import FragmentationArgs, build_fragmentation
from vgpu_extender.policies.lookahead import LookaheadArgs, build_lookahead
from vgpu_extender.policies.ss_lookahead import SsLookahead, SsLookaheadArgs, build_ss_lookahead
from vgpu_extender.policies.sum_squares import (
    GapBook,
    SumSquares,
    SumSquaresArgs,
    build_sum_squares,
    ss_change,
)
from vgpu_extender.policies.typical_pods import TypicalPod, WeightedShape

G2 = "G2"


def shape(milli: int, count: int = 1) -> TypicalPod:
    return TypicalPod.from_milli(cpu_milli=0, gpu_milli=milli, count=count)


def nodes(*free: list[int]) -> ClusterIndex:
    """Node ``n<i>`` has devices with ``free[i]`` milli left."""
    index = make_index(
        *(
            make_node(f"n{i}", len(f), mem=1000, cores=100, count=10, type=G2, cpu_milli=16_000)
            for i, f in enumerate(free)
        )
    )
    for i, f in enumerate(free):
        for j, g in enumerate(f):
            if g < 1000:
                use(index, f"held-{i}-{j}", f"n{i}", [(j, 1000 - g, (1000 - g) // 10)])
    return index


def policy(shapes: list[WeightedShape], **kw: float | bool) -> SumSquares:
    return build_sum_squares(SumSquaresArgs(typical_pods=tuple(shapes), **kw))  # type: ignore[arg-type]


HALF_650_HALF_320: list[WeightedShape] = [(0.5, shape(650)), (0.5, shape(320))]
SHARE_320 = make_request(1, pct=32, cores=32)
#: n0: a 470 on its GPU (530 free); n1: a free GPU; n2..n4: 790 on theirs (210 free).
CLUSTER = ([530], [1000], [210], [210], [210])


def counts(**n: int) -> np.ndarray:
    out = np.zeros(1001, dtype=np.int64)
    for gap, k in n.items():
        out[int(gap[1:])] = k
    return out


def test_the_change_of_the_sum_of_squares() -> None:
    # N(530) = 1, N(210) = 3. A 320 share:
    #   530 -> 210: (N(210)+1)^2 - N(210)^2 + (N(530)-1)^2 - N(530)^2 = 7 - 1 = 6;
    #   fresh -> 680: 2 N(680) + 1 = 1 (a free device is not counted);
    #   320 -> 0: an exact fill, 1 - 2 N(320) = 1 (no 320 gap yet).
    n = counts(g530=1, g210=3)
    g, g2 = np.array([530, 1000, 320]), np.array([210, 680, 0])
    live = np.ones(3, dtype=np.bool_)
    assert ss_change(n, g, g2, live, live).tolist() == [6, 1, 1]
    # Not counted after (a gap no typical pod fits): only the gap left behind counts.
    assert ss_change(n, g, g2, live, ~live).tolist() == [1 - 2, 0, 1]


def test_sum_squares_takes_the_gap_fgd_would_not() -> None:
    # FGD (typical 650 and 320, 1/2 each) on the 320 pod: n0 530 -> 210, delta 55, score
    # 51; n1 1000 -> 680, delta 0, score 50 (fragmentation's and lookahead's case).
    # Every gap counted: N(530) = 1, N(210) = 3: SS is 6 on n0, 1 on n1: n1 only.
    index = nodes(*CLUSTER)
    rows = index.rows_of(["n0", "n1"])
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(HALF_650_HALF_320)))
    assert fgd.score_nodes(index, SHARE_320, rows).tolist() == [51, 50]
    got = policy(HALF_650_HALF_320, live_gaps=False).score_nodes(index, SHARE_320, rows)
    assert np.isnan(got[0]) and got[1] == 50


def test_gaps_no_typical_pod_fits_are_as_good_as_full() -> None:
    # live_gaps (the default): 210 fits neither 650 nor 320, so N(210) is not counted
    # and 530 -> 210 counts as a fill: SS -1 on n0 against +1 on n1: n0, FGD's choice.
    index = nodes(*CLUSTER)
    got = policy(HALF_650_HALF_320).score_nodes(index, SHARE_320, index.rows_of(["n0", "n1"]))
    assert got[0] == 51 and np.isnan(got[1])


def test_window_zero_only_breaks_fgds_ties() -> None:
    # Only n0 has FGD's best score (51): SS chooses among it alone.
    index = nodes(*CLUSTER)
    got = policy(HALF_650_HALF_320, live_gaps=False, window=0.0).score_nodes(
        index, SHARE_320, index.rows_of(["n0", "n1"])
    )
    assert got[0] == 51 and np.isnan(got[1])


def test_the_device_follows_the_chosen_gap() -> None:
    # One node with the 530 and a free GPU, N(210) = 3 elsewhere: every gap counted, the
    # free GPU (SS 1) before the 530 (SS 6), which FGD would take.
    index = nodes([530, 1000], [210], [210], [210])
    ss = policy(HALF_650_HALF_320, live_gaps=False)
    ss.score_nodes(index, SHARE_320, index.rows_of(["n0"]))
    state = NodeState.of(index, index.row_of("n0") or 0, SHARE_320)
    assert ss.rank_devices(state, SHARE_320.containers[0], [0, 1]) == [1, 0]
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(HALF_650_HALF_320)))
    fgd.score_nodes(index, SHARE_320, index.rows_of(["n0"]))
    assert fgd.rank_devices(state, SHARE_320.containers[0], [0, 1]) == [0, 1]


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(make_request(1, pct=100, cores=100), id="one whole GPU"),
        pytest.param(make_request(2, pct=100, cores=100), id="two whole GPUs"),
        pytest.param(make_request(0), id="host only"),
    ],
)
def test_other_pods_are_scored_as_fgd_scores_them(request_: object) -> None:
    index = nodes([1000, 1000, 530], [1000, 1000, 1000], [210, 1000, 1000])
    rows = index.rows_of(["n0", "n1", "n2"])
    shapes = [(0.5, shape(1000, count=2)), (0.25, shape(1000)), (0.25, shape(320))]
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(shapes)))
    assert (
        policy(shapes).score_nodes(index, request_, rows).tolist()  # type: ignore[arg-type]
        == fgd.score_nodes(index, request_, rows).tolist()  # type: ignore[arg-type]
    )


def test_the_gap_book_follows_the_cluster() -> None:
    # Kept counts after a placement equal a fresh count of the new state.
    index = nodes([530, 1000], [210], [680])
    compiled = CompiledShapes.of(HALF_650_HALF_320)
    book = GapBook()
    first = book.update(index, compiled, 0, live=False).copy()
    assert {int(g): int(first[g]) for g in np.flatnonzero(first)} == {530: 1, 210: 1, 680: 1}
    use(index, "next", "n0", [(1, 320, 32)])
    kept = book.update(index, compiled, 0, live=False)
    assert {int(g): int(kept[g]) for g in np.flatnonzero(kept)} == {530: 1, 210: 1, 680: 2}
    assert kept.tolist() == GapBook().update(index, compiled, 0, live=False).tolist()
    # Live only: 210 fits no typical pod.
    live = GapBook().update(index, compiled, 0, live=True)
    assert {int(g): int(live[g]) for g in np.flatnonzero(live)} == {530: 1, 680: 2}


def test_registered_and_served_by_the_planner() -> None:
    assert BUILTIN["sum-squares"].args is SumSquaresArgs
    index = nodes([530, 1000], [210], [210], [210])
    args = {"sum-squares": SumSquaresArgs(typical_pods=tuple(HALF_650_HALF_320), live_gaps=False)}
    config = ProfileConfig(node_score="sum-squares", device_rank="sum-squares")
    best = Planner(index, default_profile(config, args)).best(SHARE_320, ["n0"])
    assert isinstance(best, tuple) and best[0] == "n0"
    assert best[1].containers[0][0].uuid.endswith("gpu1")  # the free GPU, not the 530


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        pytest.param({"window": -1.0}, "window", id="negative window"),
        pytest.param({"window": math.nan}, "window", id="window not a number"),
        pytest.param({"live_gaps": 1}, "live_gaps", id="live_gaps not a bool"),
        pytest.param({"host_pack": 1.5}, "host_pack", id="fragmentation's own checks"),
    ],
)
def test_bad_arguments_name_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ArgumentError, match=field):
        SumSquaresArgs(**kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- ss-lookahead
def ss_lookahead(shapes: list[WeightedShape], **kw: float | bool) -> SsLookahead:
    return build_ss_lookahead(SsLookaheadArgs(typical_pods=tuple(shapes), **kw))  # type: ignore[arg-type]


def test_ss_lookahead_looks_ahead_among_the_gaps_ss_keeps() -> None:
    # lookahead's case: n0 530, n1 free; lookahead scores n0 51 - 1 and n1 50 + 2 (n1).
    # SS (210 fits no typical pod, so 530 -> 210 is a fill): -1 on n0, +1 on n1: only n0
    # stays, with its outlook at weight 2, 51 + round(2 * -27.5 / 40) = 51 - 1.
    index = nodes([530], [1000])
    rows = index.rows_of(["n0", "n1"])
    ahead = build_lookahead(LookaheadArgs(typical_pods=tuple(HALF_650_HALF_320)))
    assert ahead.score_nodes(index, SHARE_320, rows).tolist() == [50, 52]
    got = ss_lookahead(HALF_650_HALF_320).score_nodes(index, SHARE_320, rows)
    assert got[0] == 50 and np.isnan(got[1])
    # Without the outlook it is sum-squares.
    plain = ss_lookahead(HALF_650_HALF_320, weight=0.0).score_nodes(index, SHARE_320, rows)
    assert plain[0] == 51 and np.isnan(plain[1])


def test_ss_lookahead_places_other_pods_as_fgd_does() -> None:
    index = nodes([1000, 1000, 530], [1000, 1000, 1000], [210, 1000, 1000])
    rows = index.rows_of(["n0", "n1", "n2"])
    shapes = [(0.5, shape(1000, count=2)), (0.5, shape(320))]
    two = make_request(2, pct=100, cores=100)
    fgd = build_fragmentation(FragmentationArgs(typical_pods=tuple(shapes)))
    assert (
        ss_lookahead(shapes).score_nodes(index, two, rows).tolist()
        == fgd.score_nodes(index, two, rows).tolist()
    )


def test_ss_lookahead_registered_and_served_by_the_planner() -> None:
    assert BUILTIN["ss-lookahead"].args is SsLookaheadArgs
    assert SsLookaheadArgs().weight == 2.0
    index = nodes([530, 1000], [210], [210], [210])
    args = {"ss-lookahead": SsLookaheadArgs(typical_pods=tuple(HALF_650_HALF_320), live_gaps=False)}
    config = ProfileConfig(node_score="ss-lookahead", device_rank="ss-lookahead")
    best = Planner(index, default_profile(config, args)).best(SHARE_320, ["n0"])
    assert isinstance(best, tuple) and best[1].containers[0][0].uuid.endswith("gpu1")
    with pytest.raises(ArgumentError, match="live_gaps"):
        SsLookaheadArgs(live_gaps="yes")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="beam"):
        SsLookaheadArgs(beam=0)
