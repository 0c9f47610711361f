"""Per-row vectors remembered by row stamp (``ClusterIndex.row_vector``).

- Directly: the first read computes every row, a repeated read none, a changed row is
  computed alone, rows added later are computed when first read, a cleared vector
  computes every row again, keys never share values, and the vector handed out cannot
  be written.
- A property (hypothesis, stateful): under random sequences of index changes, the
  remembered usage score of every row equals the score computed afresh, and the
  ``binpack`` and ``spread`` policies score exactly as the plain formula does.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from tests.support.builders import make_index, make_node, make_request, use
from tests.support.index_machine import TopologyChanges, inventories
from vgpu_extender.domain import NodeInventory
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.columns import IntVec
from vgpu_extender.policies import default_profile
from vgpu_extender.policies.usage import node_usage_score


class Counting:
    """A row computation that records which rows it was asked for."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def __call__(self, index: ClusterIndex, rows: IntVec) -> np.ndarray:
        self.asked.append(rows.tolist())
        return node_usage_score(index, rows)


def cluster(nodes: int = 6) -> ClusterIndex:
    return make_index(*(make_node(f"n{i}", 2) for i in range(nodes)))


def test_the_first_read_computes_every_row_and_a_repeated_read_none() -> None:
    index = cluster()
    use(index, "p", "n2", [(0, 4096, 50)])
    compute = Counting()
    first = index.row_vector("usage", compute)
    assert compute.asked == [list(range(6))]
    np.testing.assert_array_equal(first, node_usage_score(index, np.arange(6)))
    again = index.row_vector("usage", compute)
    assert compute.asked == [list(range(6))]
    np.testing.assert_array_equal(again, first)


def test_a_changed_row_is_computed_alone() -> None:
    index = cluster()
    compute = Counting()
    index.row_vector("usage", compute)
    use(index, "p", "n4", [(1, 8192, 100)])
    row = index.row_of("n4")
    after = index.row_vector("usage", compute)
    assert compute.asked[1:] == [[row]]
    assert after[row] > 0
    np.testing.assert_array_equal(after, node_usage_score(index, np.arange(6)))
    index.release("p")
    assert index.row_vector("usage", compute)[row] == 0
    assert compute.asked[2:] == [[row]]


def test_rows_added_later_are_computed_when_first_read() -> None:
    index = make_index(make_node("a", 1))
    compute = Counting()
    index.row_vector("usage", compute)
    for i in range(80):  # past the grid's first size: the rows array grows
        index.upsert_node(make_node(f"late{i}", 1))
    use(index, "p", "late70", [(0, 8192, 100)])
    vector = index.row_vector("usage", compute)
    assert len(vector) == index.row_span
    assert sorted(compute.asked[1]) == [index.row_of(f"late{i}") for i in range(80)]
    np.testing.assert_array_equal(vector, node_usage_score(index, np.arange(index.row_span)))


def test_cleared_vectors_compute_every_row_again() -> None:
    index = cluster()
    compute = Counting()
    index.row_vector("usage", compute)
    index.row_vectors.clear()
    index.row_vector("usage", compute)
    assert compute.asked == [list(range(6)), list(range(6))]


def test_keys_do_not_share_values() -> None:
    index = cluster()
    use(index, "p", "n0", [(0, 8192, 100)])
    usage = index.row_vector("usage", node_usage_score)
    doubled = index.row_vector("doubled", lambda i, rows: 2 * node_usage_score(i, rows))
    np.testing.assert_array_equal(doubled, 2 * usage)


def test_the_vector_handed_out_is_read_only() -> None:
    index = cluster()
    vector = index.row_vector("usage", node_usage_score)
    with pytest.raises(ValueError, match="read-only"):
        vector[0] = 1.0


# ----------------------------------------------------------------- the property


class RememberedScoreMachine(TopologyChanges):
    """Random index changes; after each, the remembered usage scores equal fresh ones."""

    def __init__(self) -> None:
        super().__init__()
        self.policies = default_profile()

    def changed(self, before: object) -> None:
        self.check_scores()

    @initialize(nodes=st.lists(inventories(), min_size=1, max_size=4), fillers=st.booleans())
    def register(self, nodes: list[NodeInventory], fillers: bool) -> None:
        self.register_nodes(nodes, fillers)

    @rule()
    def check_scores(self) -> None:
        index = self.index
        rows = index.rows_of(index.node_names())
        fresh = node_usage_score(index, rows)
        remembered = index.row_vector(node_usage_score, node_usage_score).take(rows)
        np.testing.assert_array_equal(remembered, fresh)
        request = make_request(1, mem=1000)
        for name, sign in (("binpack", 1.0), ("spread", -1.0)):
            scores = self.policies.node_scorers[name].score_nodes(index, request, rows)
            np.testing.assert_array_equal(scores, sign * fresh)


RememberedScoreMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_remembered_scores_equal_fresh_ones = RememberedScoreMachine.TestCase
