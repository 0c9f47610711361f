"""Remembered rejections: fit reuses a node's verdict while its row is unchanged.

- The cache alone: a hit returns the very objects, only rows whose stamp moved are
  explained again, keys and epochs separate verdicts, and it holds a bounded number of
  request shapes.
- The index: every change to a row moves that row's stamp, and no other row's.
- Through fit: reuse across pods of one shape, not across shapes, and never a stale
  verdict for a row reused by another node.
- A property (hypothesis, stateful): under random sequences of index changes, every
  cached fit gives exactly the rejections of a fresh, uncached explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from tests.support.builders import (
    make_container,
    make_index,
    make_node,
    make_request,
    use,
)
from tests.support.index_machine import (
    NAMES,
    REQUESTS,
    TWISTS,
    IndexChanges,
    inventories,
)
from vgpu_extender.domain import (
    NodeInventory,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
)
from vgpu_extender.engine import AllocationError, ClusterIndex, choose_devices, fit, static_mask
from vgpu_extender.engine.columns import IntVec
from vgpu_extender.engine.explain import explain_rows
from vgpu_extender.engine.rejection_cache import DEFAULT_SHAPES, RejectionCache
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

# ----------------------------------------------------------------- helpers


class CountingExplain:
    """A stand-in explanation: a fresh ``Rejection`` per row, recording the rows asked."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def __call__(self, rows: IntVec) -> list[Rejection]:
        self.asked.append(rows.tolist())
        return [Rejection(Reason.SLOTS, need=int(r), have=len(self.asked)) for r in rows]


def stamps_of(*values: int) -> IntVec:
    return np.array(values, dtype=np.int64)


def rows_at(*values: int) -> IntVec:
    return np.array(values, dtype=np.int64)


def uncached(
    index: ClusterIndex, request: PodRequest, candidates: Sequence[str]
) -> list[tuple[str, Rejection]]:
    """Every candidate's rejection, as fit gives it without any remembered verdict: the
    known nodes fit rejects, explained afresh by ``explain_rows``; unknown nodes."""
    feasible = set(fit(index, request, candidates, explain=False).feasible)
    rejected = [name for name in candidates if name not in feasible]
    known = [name for name in rejected if name in index]
    static = static_mask(index, request)
    if request.managed:
        static = static[: max(index.row_span, 1)]
    fresh = explain_rows(index, request, index.rows_of(known), static) if known else []
    verdicts = dict(zip(known, fresh, strict=True))
    gone = Rejection(Reason.UNKNOWN_NODE, unresolvable=True)
    return [(name, verdicts.get(name, gone)) for name in rejected]


def in_candidate_order(
    rejections: dict[str, Rejection], candidates: Sequence[str]
) -> list[tuple[str, Rejection]]:
    return [(name, rejections[name]) for name in candidates if name in rejections]


def assert_same_verdicts(
    got: list[tuple[str, Rejection]], want: list[tuple[str, Rejection]]
) -> None:
    assert [name for name, _ in got] == [name for name, _ in want]
    for (name, a), (_, b) in zip(got, want, strict=True):
        assert a == b, name  # reason, numbers, unresolvable flag and detail
        assert a.message(NVIDIA_WORDING) == b.message(NVIDIA_WORDING), name


def full_node(index: ClusterIndex, node: str, gpus: int, uid: str) -> None:
    """Take every device's memory on ``node``."""
    use(index, uid, node, [(g, 8192, 10) for g in range(gpus)])


# ----------------------------------------------------------------- the cache alone


def test_a_hit_returns_the_same_objects_without_explaining() -> None:
    cache, explain = RejectionCache(), CountingExplain()
    stamps = stamps_of(5, 6, 7, 8)
    first = cache.rejections("shape", None, rows_at(1, 3), stamps, explain)
    again = cache.rejections("shape", None, rows_at(3, 1), stamps, explain)
    assert explain.asked == [[1, 3]]
    assert again[0] is first[1] and again[1] is first[0]
    assert (cache.hits, cache.misses) == (2, 2)


def test_a_moved_stamp_explains_only_that_row() -> None:
    cache, explain = RejectionCache(), CountingExplain()
    stamps = stamps_of(5, 6, 7, 8)
    first = cache.rejections("shape", None, rows_at(0, 1, 2), stamps, explain)
    stamps[1] = 9
    second = cache.rejections("shape", None, rows_at(0, 1, 2), stamps, explain)
    assert explain.asked == [[0, 1, 2], [1]]
    assert second[0] is first[0] and second[2] is first[2]
    assert second[1] != first[1]


def test_rows_new_to_a_shape_are_explained_with_the_known_ones_reused() -> None:
    cache, explain = RejectionCache(), CountingExplain()
    stamps = stamps_of(1, 2, 3, 4)
    cache.rejections("shape", None, rows_at(0, 1), stamps, explain)
    got = cache.rejections("shape", None, rows_at(0, 2, 1, 3), stamps, explain)
    assert explain.asked == [[0, 1], [2, 3]]
    assert [r.need for r in got] == [0, 2, 1, 3]  # the stand-in's need is the row


def test_another_key_or_epoch_does_not_reuse() -> None:
    cache, explain = RejectionCache(), CountingExplain()
    stamps = stamps_of(1, 2)
    cache.rejections("a", None, rows_at(0, 1), stamps, explain)
    cache.rejections("b", None, rows_at(0, 1), stamps, explain)
    cache.rejections("a", (0, 1), rows_at(0, 1), stamps, explain)
    assert explain.asked == [[0, 1], [0, 1], [0, 1]]


def test_it_follows_a_growing_grid() -> None:
    cache, explain = RejectionCache(), CountingExplain()
    cache.rejections("shape", None, rows_at(1), stamps_of(1, 2), explain)
    got = cache.rejections("shape", None, rows_at(1, 5), stamps_of(1, 2, 0, 0, 0, 3), explain)
    assert explain.asked == [[1], [5]]
    assert [r.need for r in got] == [1, 5]


def test_it_holds_a_bounded_number_of_shapes_least_recent_first_out() -> None:
    cache, explain = RejectionCache(shapes=3), CountingExplain()
    stamps = stamps_of(1)
    for key in ("a", "b", "c"):
        cache.rejections(key, None, rows_at(0), stamps, explain)
    cache.rejections("a", None, rows_at(0), stamps, explain)  # "b" is now the oldest
    cache.rejections("d", None, rows_at(0), stamps, explain)
    assert len(cache) == 3
    asked = len(explain.asked)
    cache.rejections("a", None, rows_at(0), stamps, explain)
    assert len(explain.asked) == asked  # kept
    cache.rejections("b", None, rows_at(0), stamps, explain)
    assert len(explain.asked) == asked + 1  # evicted
    with pytest.raises(ValueError):
        RejectionCache(shapes=0)


# ----------------------------------------------------------------- the row stamps


def test_every_change_moves_only_its_rows_stamp() -> None:
    index = make_index(make_node("a", 2), make_node("b", 2))
    a, b = index.row_of("a"), index.row_of("b")
    assert a is not None and b is not None

    def moved(change: Any) -> set[int]:
        before = index.row_stamps.copy()
        change()
        after = index.row_stamps
        return {int(r) for r in np.flatnonzero(after[: len(before)] != before)}

    assert moved(lambda: use(index, "p", "a", [(0, 1000, 10)])) == {a}
    assert moved(lambda: index.release("p")) == {a}
    assert moved(lambda: index.set_cordoned("b", ["b-gpu1"])) == {b}
    assert moved(lambda: index.upsert_node(make_node("b", 3))) == {b}
    assert moved(lambda: index.remove_node("a")) == {a}
    # A refused change changes nothing.
    before = index.row_stamps.copy()
    with pytest.raises(AllocationError):
        use(index, "q", "b", [(0, 99_999, 10)])
    assert (index.row_stamps == before).all()
    assert moved(lambda: index.release("nobody")) == set()


def test_stamps_only_grow_so_a_reused_row_never_matches_an_old_stamp() -> None:
    index = make_index(make_node("a", 2))
    row = index.row_of("a")
    assert row is not None
    old = int(index.row_stamps[row])
    index.remove_node("a")
    index.upsert_node(make_node("z", 2))
    assert index.row_of("z") == row
    assert int(index.row_stamps[row]) > old


# ----------------------------------------------------------------- through fit


def test_pods_of_one_shape_reuse_the_verdicts() -> None:
    nodes = [make_node(n, 2) for n in ("a", "b", "c")]
    index = make_index(*nodes)
    full_node(index, "a", 2, "hog")
    names = ["a", "b", "c"]
    first = fit(index, make_request(1, mem=4000, uid="p1"), names).rejections
    # Another pod, same shape: identity, priority and policies are not in the key.
    other = replace(make_request(1, mem=4000, uid="p2", node_policy="binpack"), priority=7)
    second = fit(index, other, names).rejections
    assert list(first) == ["a"]
    assert second["a"] is first["a"]
    assert (index.rejection_cache.hits, index.rejection_cache.misses) == (1, 1)


def test_a_change_to_one_rejected_node_re_explains_only_it() -> None:
    index = make_index(*(make_node(n, 2) for n in ("a", "b", "c", "d")))
    for n in ("a", "b", "c"):
        full_node(index, n, 2, f"hog-{n}")
    request, names = make_request(1, mem=4000), ["a", "b", "c", "d"]
    first = fit(index, request, names).rejections
    index.release("hog-b")
    use(index, "half", "b", [(0, 6000, 10), (1, 6000, 10)])
    cache = index.rejection_cache
    misses = cache.misses
    second = fit(index, request, names).rejections
    assert cache.misses == misses + 1
    assert second["a"] is first["a"] and second["c"] is first["c"]
    assert second["b"].have == 2192 and first["b"].have == 0
    assert_same_verdicts(in_candidate_order(second, names), uncached(index, request, names))


#: Pairs of requests differing in one thing explaining reads, each rejected by some
#: node of ``shape_cluster`` with a different verdict: a key missing that thing would
#: hand the second request the first one's verdict.
SHAPE_PAIRS = [
    pytest.param(make_request(1, mem=4000), make_request(1, mem=5000), id="memory"),
    pytest.param(make_request(1, pct=50), make_request(1, pct=75), id="memory-percent"),
    pytest.param(make_request(1, mem=4000), make_request(2, mem=4000), id="count"),
    pytest.param(make_request(1, mem=1000, cores=50), make_request(1, mem=1000), id="cores"),
    pytest.param(make_request(1, mem=4000), make_request(1, mem=4000, cores=100), id="exclusive"),
    pytest.param(
        make_request(1, mem=4000), make_request(1, mem=4000, use_types=["V100"]), id="types"
    ),
    pytest.param(
        make_request(1, mem=4000),
        make_request(1, mem=4000, avoid_uuids=["a-gpu0", "a-gpu1"]),
        id="uuids",
    ),
    pytest.param(
        make_request(2, mem=1000), make_request(2, mem=1000, numa_bind=True), id="numa-bind"
    ),
    pytest.param(
        make_request(1, mem=1000, cpu_milli=5000),
        make_request(1, mem=1000, cpu_milli=6000),
        id="cpu",
    ),
    pytest.param(
        make_request(1, mem=1000, host_memory_mib=20000),
        make_request(1, mem=1000, host_memory_mib=30000),
        id="host-memory",
    ),
    pytest.param(
        make_request(containers=[make_container(2, mem=1000), make_container(1, mem=7000)]),
        make_request(containers=[make_container(1, mem=7000), make_container(2, mem=1000)]),
        id="container-order",
    ),
]


def shape_cluster() -> ClusterIndex:
    index = make_index(
        # Devices with 2192 MiB free, host CPU and memory tracked.
        make_node("a", 2, cpu_milli=4000, memory_mib=16384),
        # A device on each NUMA node, one of them full.
        make_node("b", 2, numa=[0, 1]),
        # Memory to spare, no cores.
        make_node("c", 1),
    )
    use(index, "p", "a", [(0, 6000, 10), (1, 6000, 10)])
    use(index, "q", "b", [(1, 8192, 10)])
    use(index, "r", "c", [(0, 1000, 100)])
    return index


@pytest.mark.parametrize(("first", "second"), SHAPE_PAIRS)
def test_a_different_shape_does_not_reuse(first: PodRequest, second: PodRequest) -> None:
    index, names = shape_cluster(), ["a", "b", "c"]
    want_first, want_second = uncached(index, first, names), uncached(index, second, names)
    assert want_first != want_second  # else the pair tests nothing
    for request, want in ((first, want_first), (second, want_second), (first, want_first)):
        for _ in range(2):  # the second time from the cache
            got = fit(index, request, names).rejections
            assert_same_verdicts(in_candidate_order(got, names), want)
    assert index.rejection_cache.hits > 0


def test_a_removed_and_reused_row_gets_no_stale_verdict() -> None:
    index = make_index(make_node("a", 2), make_node("b", 2))
    full_node(index, "a", 2, "hog")
    request = make_request(1, mem=4000)
    before = fit(index, request, ["a", "b"]).rejections["a"]
    assert before.reason is Reason.MEMORY
    row = index.row_of("a")
    index.remove_node("a")
    index.upsert_node(make_node("z", 2, unhealthy=[0, 1]))
    assert index.row_of("z") == row
    after = fit(index, request, ["z", "b"]).rejections
    assert after["z"].reason is Reason.UNHEALTHY
    # And the same name back on the row, now empty: it fits.
    index.remove_node("z")
    index.upsert_node(make_node("a", 2))
    assert index.row_of("a") == row
    assert fit(index, request, ["a", "b"]).rejections == {}


def test_a_cordon_is_seen() -> None:
    index = make_index(make_node("a", 2, cordoned=[0]))
    request = make_request(2)
    assert fit(index, request, ["a"]).rejections["a"].reason is Reason.CORDONED
    index.set_cordoned("a", [])
    assert fit(index, request, ["a"]).rejections == {}
    index.set_cordoned("a", ["a-gpu1"])
    assert fit(index, request, ["a"]).rejections["a"].reason is Reason.CORDONED


def test_the_exact_check_still_judges_its_rows_on_every_call() -> None:
    # Two containers of 5000 MiB: each fits "a" alone, together they do not ("a" has
    # one device with room); "b" is full, rejected by the vectorised check.
    index = make_index(make_node("a", 2), make_node("b", 2))
    use(index, "p", "a", [(1, 6000, 10)])
    full_node(index, "b", 2, "hog")
    request = make_request(containers=[make_container(1, mem=5000)] * 2)
    names = ["a", "b"]

    def exact(row: int) -> PodAssignment | Rejection:
        return choose_devices(index, request, index.name_of(row))

    first = fit(index, request, names, exact=exact).rejections
    index.release("p")  # now both containers fit "a"
    second = fit(index, request, names, exact=exact).rejections
    assert set(first) == {"a", "b"} and set(second) == {"b"}
    assert second["b"] is first["b"]
    assert_same_verdicts(in_candidate_order(second, names), uncached(index, request, names))


def test_the_index_holds_a_bounded_number_of_shapes() -> None:
    index = make_index(make_node("a", 1))
    use(index, "p", "a", [(0, 8192, 10)])
    for mem in range(1, DEFAULT_SHAPES * 3):
        fit(index, make_request(1, mem=mem), ["a"])
    assert len(index.rejection_cache) == DEFAULT_SHAPES


# ----------------------------------------------------------------- the property

CACHED_SHAPES = 4


class CachedFitMachine(IndexChanges):
    """Random index changes between fits; every fit is checked against a fresh one."""

    def __init__(self) -> None:
        super().__init__()
        self.index.rejection_cache = RejectionCache(shapes=CACHED_SHAPES)
        self.fits = 0

    @initialize(
        nodes=st.lists(inventories(), min_size=1, max_size=4),
        shapes=st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=5, unique=True),
        twists=st.lists(st.sampled_from(TWISTS), max_size=3),
    )
    def register(
        self,
        nodes: list[NodeInventory],
        shapes: list[PodRequest],
        twists: list[Callable[[PodRequest], PodRequest]],
    ) -> None:
        for node in nodes:
            self.index.upsert_node(node)
        # The shapes of this run: few enough to repeat, sometimes more than the cache holds.
        self.shapes = shapes + [twist(shapes[0]) for twist in twists]

    @rule(node=inventories())
    def upsert(self, node: NodeInventory) -> None:
        self._change(lambda: self.index.upsert_node(node))

    @rule(name=st.sampled_from(NAMES))
    def remove(self, name: str) -> None:
        self._change(lambda: self.index.remove_node(name))

    @rule(
        data=st.data(),
        uid=st.sampled_from(["a", "b"]),
        names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True),
    )
    def check_fit(self, data: st.DataObject, uid: str, names: list[str]) -> None:
        self._check_fit(data.draw(st.sampled_from(self.shapes)), uid, names)

    @rule(data=st.data())
    def check_fit_of_all(self, data: st.DataObject) -> None:
        """Every node, as kube-scheduler asks: the case the cache is for."""
        self._check_fit(data.draw(st.sampled_from(self.shapes)), "c", NAMES)

    def _check_fit(self, request: PodRequest, uid: str, names: list[str]) -> None:
        request = replace(request, uid=uid, name=uid)
        got = fit(self.index, request, names)
        assert_same_verdicts(
            in_candidate_order(got.rejections, names), uncached(self.index, request, names)
        )
        assert got.feasible == fit(self.index, request, names, explain=False).feasible
        self.fits += 1

    @invariant()
    def bounded(self) -> None:
        assert len(self.index.rejection_cache) <= CACHED_SHAPES


CachedFitMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_cached_fit_equals_a_fresh_explanation = CachedFitMachine.TestCase
