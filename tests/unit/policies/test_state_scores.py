"""Node-state scores kept between pods: only states not seen before are scored, and the
scores are those a fresh policy gives.

Devices have 1000 MiB and 100 cores, so a device's free capacity in milli is its free
cores x 10; nodes have 16 vCPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tests.support.builders import make_index, make_node, make_request, use
from vgpu_extender.domain import PodRequest
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import FloatVec, IntVec
from vgpu_extender.policies.fragment_math import Devices
from vgpu_extender.policies.fragmentation import Fragmentation
from vgpu_extender.policies.lookahead import Lookahead
from vgpu_extender.policies.state_scores import StateScores
from vgpu_extender.policies.sum_squares import SumSquares
from vgpu_extender.policies.typical_pods import ShapeCounter, TypicalPod, WeightedShape


def scorer(ids: IntVec, asked: list[list[int]]) -> Callable[[IntVec], FloatVec]:
    """Scores state ``s`` as ``10 s``, and records the states it is asked for."""

    def compute(at: IntVec) -> FloatVec:
        asked.append(ids[at].tolist())
        out: FloatVec = ids[at].astype(np.float64) * 10.0
        return out

    return compute


def test_only_states_not_seen_under_the_key_are_computed() -> None:
    memo = StateScores(keep=2)
    asked: list[list[int]] = []
    ids = np.array([3, 0, 3, 5], dtype=np.int64)
    more = np.array([5, 7, 0], dtype=np.int64)

    assert memo.scores("a", ids, scorer(ids, asked)).tolist() == [30.0, 0.0, 30.0, 50.0]
    assert asked == [[3, 0, 3, 5]]  # a repeated state is asked with the others
    assert memo.scores("a", more, scorer(more, asked)).tolist() == [50.0, 70.0, 0.0]
    assert asked[-1] == [7]
    # Another key is its own: its states are computed afresh.
    memo.scores("b", more, scorer(more, asked))
    assert (len(asked), asked[-1]) == (3, [5, 7, 0])
    # Beyond ``keep`` keys the least recently used is forgotten: "c" pushes out "a".
    memo.scores("c", more, scorer(more, asked))
    memo.scores("b", more, scorer(more, asked))
    assert len(asked) == 4  # "c" computed, "b" still known
    memo.scores("a", more, scorer(more, asked))
    assert len(asked) == 5  # "a" forgotten


def test_no_states_asks_nothing() -> None:
    memo = StateScores()
    empty = np.zeros(0, dtype=np.int64)

    def refuse(_at: IntVec) -> FloatVec:
        raise AssertionError("nothing to compute")

    assert memo.scores("a", empty, refuse).tolist() == []


def shape(milli: int) -> TypicalPod:
    return TypicalPod.from_milli(cpu_milli=0, gpu_milli=milli, count=1)


SHAPES: tuple[WeightedShape, ...] = ((0.5, shape(650)), (0.3, shape(320)), (0.2, shape(1000)))


@dataclass(slots=True)
class CountingFragmentation(Fragmentation):
    """``fragmentation`` that records the rows it scores."""

    scored: list[list[int]] = field(default_factory=list)

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        self.scored.append(rows.tolist())
        return Fragmentation._score_distinct(self, index, request, rows, d)


def cluster() -> ClusterIndex:
    """Four nodes of two GPUs: n0 and n1 alike (a 470 on GPU 0), n2 and n3 free."""
    index = make_index(
        *(make_node(f"n{i}", 2, mem=1000, cores=100, count=10, cpu_milli=16_000) for i in range(4))
    )
    use(index, "a", "n0", [(0, 470, 47)])
    use(index, "b", "n1", [(0, 470, 47)])
    return index


def test_fragmentation_scores_again_only_the_node_that_changed() -> None:
    index = cluster()
    remembering = CountingFragmentation(shapes=SHAPES)
    share = make_request(1, pct=32, cores=32)
    rows = index.rows_of(index.node_names())

    first = remembering.score_nodes(index, share, rows)
    assert [len(r) for r in remembering.scored] == [2]  # two distinct states of four nodes
    use(index, "c", "n2", [(1, 320, 32)])
    second = remembering.score_nodes(index, share, rows)
    assert remembering.scored[-1] == [int(index.row_of("n2") or 0)]  # n2's new state only

    # What a fresh policy scores, on the cluster as it is now, is what was remembered.
    fresh = Fragmentation(shapes=SHAPES).score_nodes(index, share, rows)
    np.testing.assert_array_equal(second, fresh)
    # n2 changed; the others kept their scores.
    changed = rows == index.row_of("n2")
    np.testing.assert_array_equal(second[~changed], first[~changed])
    assert second[changed][0] != first[changed][0]

    # A pod of another shape is scored afresh, then remembered under its own key.
    whole = make_request(1, pct=100, cores=100)
    remembering.score_nodes(index, whole, rows)
    assert len(remembering.scored[-1]) == 3  # n0/n1 alike, n2, n3: three states
    np.testing.assert_array_equal(
        remembering.score_nodes(index, whole, rows),
        Fragmentation(shapes=SHAPES).score_nodes(index, whole, rows),
    )
    assert len(remembering.scored) == 3  # the second whole-GPU scoring computed nothing


@dataclass(slots=True)
class CountingSumSquares(SumSquares):
    """``sum-squares`` that records the rows it scores."""

    scored: list[list[int]] = field(default_factory=list)

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        self.scored.append(rows.tolist())
        return SumSquares._score_distinct(self, index, request, rows, d)


def test_policies_that_read_the_rest_of_the_cluster_do_not_remember_by_state() -> None:
    assert Fragmentation.scores_by_state
    assert not Lookahead.scores_by_state
    assert not SumSquares.scores_by_state
    # SS's gap counts are the cluster's: every state is scored for every pod.
    index = cluster()
    ss = CountingSumSquares(shapes=SHAPES)
    share = make_request(1, pct=32, cores=32)
    rows = index.rows_of(index.node_names())
    ss.score_nodes(index, share, rows)
    ss.score_nodes(index, share, rows)
    assert [len(r) for r in ss.scored] == [2, 2]


def test_a_learning_policy_scores_afresh_once_it_has_learned() -> None:
    """Learned typical pods change with every pod observed, and so do the scores."""
    index = cluster()
    learning = CountingFragmentation(learner=ShapeCounter(prior=SHAPES))
    share = make_request(1, pct=32, cores=32)
    rows = index.rows_of(index.node_names())
    learning.score_nodes(index, share, rows)
    learning.score_nodes(index, share, rows)
    assert len(learning.scored) == 1  # nothing observed: remembered
    learning.observe(make_request(1, pct=81, cores=81))
    after = learning.score_nodes(index, share, rows)
    assert len(learning.scored) == 2
    fresh = Fragmentation(learner=ShapeCounter(prior=SHAPES))
    fresh.observe(make_request(1, pct=81, cores=81))
    np.testing.assert_array_equal(after, fresh.score_nodes(index, share, rows))
