"""Remembered fit verdicts: fit judges again only the candidates whose row changed.

- Through fit: a repeated call judges no row, a changed row is judged alone, another
  rows array or a topology change judges every candidate, requests differing in one
  field fit reads never share verdicts, pods with several device containers and pods
  without devices are not remembered, and the cache stays bounded.
- A property (hypothesis, stateful): under random sequences of index changes, every
  remembered fit gives exactly what a fit judged afresh (``remember=False``) gives, and
  every change that alters a row's data or index-wide data moves that row's stamp or
  the topology version.
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

from tests.support.builders import V100, make_container, make_index, make_node, make_request, use
from tests.support.index_machine import (
    FILLERS,
    NAMES,
    REQUESTS,
    TWISTS,
    TopologyChanges,
    inventories,
)
from vgpu_extender.domain import (
    NodeInventory,
    PodAssignment,
    PodRequest,
    Rejection,
)
from vgpu_extender.engine import ClusterIndex, FitResult, choose_devices, fit
from vgpu_extender.engine.fit_cache import DEFAULT_LISTS, DEFAULT_SHAPES, FitCache
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

#: Unknown names: they pad candidate lists to the length ``rows_of`` remembers (shorter
#: lists get a fresh rows array every time, which the cache can never match).
GHOSTS = [f"ghost{i}" for i in range(32)]

# ----------------------------------------------------------------- helpers


def assert_same_fit(got: FitResult, want: FitResult) -> None:
    assert got.feasible == want.feasible
    assert got.rows.tolist() == want.rows.tolist()
    assert list(got.rejections) == list(want.rejections)
    for name, rejection in got.rejections.items():
        assert rejection == want.rejections[name], name
        wanted = want.rejections[name].message(NVIDIA_WORDING)
        assert rejection.message(NVIDIA_WORDING) == wanted, name


def checked_fit(
    index: ClusterIndex,
    request: PodRequest,
    names: Sequence[str],
    exact: Callable[[int], PodAssignment | Rejection] | None = None,
) -> FitResult:
    """``fit``, checked against the same fit judged afresh."""
    got = fit(index, request, names, exact=exact)
    assert_same_fit(got, fit(index, request, names, exact=exact, remember=False))
    return got


def cluster(nodes: int = 40) -> tuple[ClusterIndex, tuple[str, ...]]:
    """``nodes`` idle nodes of two 8 GiB devices, and the list naming them all."""
    names = tuple(f"n{i:02d}" for i in range(nodes))
    return make_index(*(make_node(n, 2) for n in names)), names


def counts(index: ClusterIndex) -> tuple[int, int]:
    return index.fit_cache.hits, index.fit_cache.misses


# ----------------------------------------------------------------- through fit


def test_a_repeated_call_judges_no_row() -> None:
    index, names = cluster()
    use(index, "hog", "n03", [(0, 8192, 10), (1, 8192, 10)])
    request = make_request(1, mem=4000)
    first = checked_fit(index, request, names)
    assert counts(index) == (0, len(names))
    # Another pod of the same shape; identity, priority and policies are not in the key.
    other = replace(make_request(1, mem=4000, uid="p2", node_policy="binpack"), priority=7)
    second = checked_fit(index, other, names)
    assert counts(index) == (len(names), len(names))
    assert second.feasible == first.feasible and "n03" not in second.feasible
    # An equal list decoded afresh: rows_of hands back the same rows array.
    checked_fit(index, request, tuple(list(names)))
    assert counts(index) == (2 * len(names), len(names))


def test_one_changed_row_is_judged_alone() -> None:
    index, names = cluster()
    request = make_request(1, mem=4000)
    checked_fit(index, request, names)
    use(index, "hog", "n05", [(0, 8192, 10), (1, 8192, 10)])
    hits, misses = counts(index)
    assert "n05" not in checked_fit(index, request, names).feasible
    assert counts(index) == (hits + len(names) - 1, misses + 1)
    index.release("hog")
    index.set_cordoned("n07", ["n07-gpu0", "n07-gpu1"])
    hits, misses = counts(index)
    result = checked_fit(index, request, names)
    assert "n05" in result.feasible and "n07" not in result.feasible
    assert counts(index) == (hits + len(names) - 2, misses + 2)
    # Judged afresh, the rows' new stamps are remembered too.
    checked_fit(index, request, names)
    assert counts(index) == (hits + 2 * len(names) - 2, misses + 2)


def test_a_changed_row_on_the_whole_grid_path_is_judged_right() -> None:
    # Four nodes: even one changed row is judged by the whole-grid passes.
    index, names = cluster(4)
    padded = names + tuple(GHOSTS)
    request = make_request(2, mem=3000, cpu_milli=100)
    checked_fit(index, request, padded)
    use(index, "p", "n01", [(0, 6000, 10)])
    hits, misses = counts(index)
    assert "n01" not in checked_fit(index, request, padded).feasible
    assert counts(index) == (hits + len(padded) - 1, misses + 1)


def test_many_rejections_are_named_from_the_remembered_names() -> None:
    index, names = cluster(100)
    for name in names[::3] + names[1::3]:  # two thirds of the nodes full
        use(index, f"hog-{name}", name, [(0, 8192, 10), (1, 8192, 10)])
    request = make_request(1, mem=4000)
    for _ in range(3):  # from the second call on, the names come from the cache
        result = checked_fit(index, request, tuple(list(names)))
        assert result.feasible == list(names[2::3])
        assert len(result.rejections) == 67
    index.release(f"hog-{names[0]}")
    assert checked_fit(index, request, names).feasible == [names[0], *names[2::3]]


def test_another_rows_array_or_a_topology_change_judges_every_candidate() -> None:
    index, names = cluster()
    request = make_request(1, mem=4000)
    checked_fit(index, request, names)
    reordered = tuple(reversed(names))
    hits, misses = counts(index)
    checked_fit(index, request, reordered)
    assert counts(index) == (hits, misses + len(names))
    # A node registers: every rows array and verdict of the old topology is dropped.
    index.upsert_node(make_node("n99", 2))
    hits, misses = counts(index)
    checked_fit(index, request, names)
    assert counts(index) == (hits, misses + len(names))
    # Re-registering a node unchanged still moves the topology.
    index.upsert_node(make_node("n00", 2))
    hits, misses = counts(index)
    checked_fit(index, request, names)
    assert counts(index) == (hits, misses + len(names))


@pytest.mark.parametrize("gpus", [2, 9], ids=["same-grid", "wider-grid"])
def test_a_node_of_the_selected_type_registering_is_seen(gpus: int) -> None:
    index, names = cluster()
    padded = (*names, "v100-node")
    request = make_request(1, mem=4000, use_types=["V100"])
    assert checked_fit(index, request, padded).feasible == []
    # Its row's stamp moves, and so does the selector's device mask (a new type, and
    # with nine devices a wider grid): the shape's mask is made again.
    index.upsert_node(make_node("v100-node", gpus, type=V100))
    assert checked_fit(index, request, padded).feasible == ["v100-node"]
    assert checked_fit(index, request, padded).feasible == ["v100-node"]
    assert index.fit_cache.hits == len(padded)


def test_unknown_candidates_stay_rejected_when_row_zero_changes() -> None:
    index, names = cluster()
    padded = (*GHOSTS[:4], *names, *GHOSTS[4:8])
    request = make_request(1, mem=4000)
    first = checked_fit(index, request, padded)
    assert set(first.rejections) == set(GHOSTS[:8])
    zero = index.name_of(0)
    use(index, "hog", zero, [(0, 8192, 10), (1, 8192, 10)])  # the unknowns' placeholder row
    second = checked_fit(index, request, padded)
    assert set(second.rejections) == {*GHOSTS[:8], zero}
    index.release("hog")
    third = checked_fit(index, request, padded)
    assert third.feasible == first.feasible
    assert index.fit_cache.hits > 0


def test_rows_are_known_by_their_contents_not_the_array() -> None:
    index, names = cluster()
    request = make_request(1, mem=4000)
    checked_fit(index, request, names)
    # Two other lists push the first out of rows_of's memory.
    for other in (names[1:], names[2:]):
        checked_fit(index, make_request(1, mem=5000), other)
    # The equal list, looked up anew, is a fresh array of the same rows: answered from
    # the verdicts, not judged again.
    hits, misses = counts(index)
    checked_fit(index, request, names)
    assert counts(index) == (hits + len(names), misses)


def test_an_array_changed_in_place_is_judged_for_what_it_holds() -> None:
    index, names = cluster()
    rows = np.array(index.rows_of(names))  # a writeable copy
    stamps = index.row_stamps

    judged: list[list[int]] = []

    def judge(mask: object, some: np.ndarray) -> np.ndarray:
        judged.append(some.tolist())
        return np.asarray(some % 2 == 0)

    key = ("shape",)
    original = rows.copy()
    first = index.fit_cache.good(key, 0, names, rows, stamps, lambda: None, judge)
    rows[:] = rows[::-1]  # the caller reuses its array for another list
    second = index.fit_cache.good(key, 0, names, rows, stamps, lambda: None, judge)
    np.testing.assert_array_equal(first.good, original % 2 == 0)
    np.testing.assert_array_equal(second.good, rows % 2 == 0)
    assert second.names is None  # a first sight of these rows: judged, names not yet held
    # The second list was judged for what it holds, not answered from the first's.
    assert judged[-1] == rows.tolist() != original.tolist()


#: Pairs of requests differing in one thing fit reads, with different feasible sets on
#: ``pair_cluster``: a key missing that thing would hand the second the first's verdicts.
FIT_PAIRS = [
    pytest.param(make_request(1, mem=4000), make_request(1, mem=7000), id="memory"),
    pytest.param(make_request(1, pct=50), make_request(1, pct=100), id="memory-percent"),
    pytest.param(make_request(1, mem=1000), make_request(3, mem=1000), id="count"),
    pytest.param(make_request(1, mem=1000, cores=50), make_request(1, mem=1000), id="cores"),
    pytest.param(make_request(1, mem=1000), make_request(1, mem=1000, cores=100), id="exclusive"),
    pytest.param(
        make_request(1, mem=1000), make_request(1, mem=1000, use_types=["V100"]), id="types"
    ),
    pytest.param(
        make_request(1, mem=1000),
        make_request(1, mem=1000, avoid_uuids=["p0-gpu0", "p0-gpu1"]),
        id="uuids",
    ),
    pytest.param(
        make_request(2, mem=1000), make_request(2, mem=1000, numa_bind=True), id="numa-bind"
    ),
    pytest.param(
        make_request(1, mem=1000, cpu_milli=3000),
        make_request(1, mem=1000, cpu_milli=5000),
        id="cpu",
    ),
    pytest.param(
        make_request(1, mem=1000, host_memory_mib=10000),
        make_request(1, mem=1000, host_memory_mib=20000),
        id="host-memory",
    ),
]


def pair_cluster() -> tuple[ClusterIndex, tuple[str, ...]]:
    index = make_index(
        # Host CPU and memory tracked; devices 5192 MiB and 30 cores free.
        make_node("p0", 2, cpu_milli=4000, memory_mib=16384),
        # V100s, one per NUMA node, idle.
        make_node("p1", 2, numa=[0, 1], type=V100),
        # A100s, a share taken on each (not exclusive any more).
        make_node("p2", 2),
        # Memory to spare, cores nearly gone.
        make_node("p3", 2),
    )
    use(index, "a", "p0", [(0, 3000, 70), (1, 3000, 70)])
    use(index, "b", "p2", [(0, 500, 10), (1, 500, 10)])
    use(index, "c", "p3", [(0, 500, 90), (1, 500, 90)])
    return index, ("p0", "p1", "p2", "p3", *GHOSTS)


@pytest.mark.parametrize(("first", "second"), FIT_PAIRS)
def test_requests_differing_in_one_field_do_not_share_verdicts(
    first: PodRequest, second: PodRequest
) -> None:
    index, names = pair_cluster()
    want_first = fit(index, first, names, remember=False)
    want_second = fit(index, second, names, remember=False)
    assert want_first.feasible != want_second.feasible  # else the pair tests nothing
    for request, want in ((first, want_first), (second, want_second), (first, want_first)):
        for _ in range(2):  # the second time from the cache
            assert_same_fit(fit(index, request, names), want)
    assert index.fit_cache.hits >= 4 * len(names)


def test_pods_with_several_device_containers_or_none_are_not_remembered() -> None:
    index, names = cluster()
    several = make_request(containers=[make_container(1, mem=3000), make_container(1, mem=3000)])

    def exact(row: int) -> PodAssignment | Rejection:
        return choose_devices(index, several, index.name_of(row))

    checked_fit(index, several, names, exact)
    checked_fit(index, several, names)
    # Init containers count as device containers too.
    with_init = make_request(
        containers=[make_container(1, init=True, mem=6000), make_container(1, mem=2000)]
    )
    checked_fit(index, with_init, names)
    checked_fit(index, make_request(containers=[make_container(0)], cpu_milli=100), names)
    assert counts(index) == (0, 0) and len(index.fit_cache) == 0


def test_the_cache_is_bounded() -> None:
    index, names = cluster()
    for mem in range(1, DEFAULT_SHAPES * 3):
        for candidates in (names, names[1:], names[2:]):
            fit(index, make_request(1, mem=mem), candidates)
    assert len(index.fit_cache) == DEFAULT_SHAPES
    assert index.fit_cache.lists_held() == DEFAULT_SHAPES * DEFAULT_LISTS
    with pytest.raises(ValueError):
        FitCache(shapes=0)
    with pytest.raises(ValueError):
        FitCache(lists=0)


def test_a_single_node_check_does_not_evict_the_list_of_every_node() -> None:
    index, names = cluster()
    request = make_request(1, mem=4000)
    checked_fit(index, request, names)
    for name in names[:5]:  # bind: one node at a time, a fresh short rows array each
        checked_fit(index, request, [name])
        hits, misses = counts(index)
        checked_fit(index, request, names)
        assert counts(index) == (hits + len(names), misses)


def test_the_verdicts_returned_are_the_callers_own() -> None:
    index, names = cluster()
    rows = index.rows_of(names)
    stamps = index.row_stamps

    def judge(chosen: Any, some: np.ndarray) -> np.ndarray:
        return np.ones(len(some), dtype=np.bool_)

    def no_selector() -> None:
        return None

    cache = FitCache()
    first = cache.good("k", 0, names, rows, stamps, no_selector, judge)
    assert first.names is None  # a list seen once: no array of its names yet
    first.good[:] = False
    again = cache.good("k", 0, list(names), rows, stamps, no_selector, judge)
    assert again.good.all() and cache.hits == len(names)
    assert again.names is not None and again.names.tolist() == list(names)
    # Another array of the same rows, even one that could change in place, is known by
    # its contents: answered from the verdicts.
    writable = np.array(rows)
    for _ in range(2):
        assert cache.good("k", 0, names, writable, stamps, no_selector, judge).names is not None
    assert cache.misses == len(names)
    writable[0] = writable[1]  # changed in place: other rows, judged afresh
    assert cache.good("k", 0, names, writable, stamps, no_selector, judge).names is None
    assert cache.misses == 2 * len(names)


# ----------------------------------------------------------------- the property

#: Candidate lists, most long enough for rows_of to remember (and so for the cache to
#: match): every node, orders, subsets, unknown names, fillers; and a short one.
LISTS: list[tuple[str, ...]] = [
    (*NAMES, *GHOSTS),
    tuple(reversed([*NAMES, *GHOSTS[:26]])),
    (*GHOSTS[:12], *NAMES[:3], *FILLERS[:20]),
    (*NAMES, *FILLERS),
    (*NAMES[2:], *NAMES[2:], *GHOSTS[:30]),  # each node twice
    tuple(NAMES[:2]),
]
SHAPES = 3
LISTS_PER_SHAPE = 2


def index_wide(index: ClusterIndex) -> object:
    """Everything index-wide fit reads that no row stamp covers: the interned types,
    where each UUID is, the NUMA ids (computed afresh) and the grid's size."""
    where = {}
    numa = set()
    for name in index.node_names():
        for dev in index.inventory(name).devices:
            where[dev.uuid] = index.locate(dev.uuid)
            numa.add(dev.numa)
    return index.types, where, sorted(numa), index.cols.rows, index.cols.slots


class RememberedFitMachine(TopologyChanges):
    """Random index changes between fits; every fit is checked against a fresh one."""

    def __init__(self) -> None:
        super().__init__()
        self.index.fit_cache = FitCache(shapes=SHAPES, lists=LISTS_PER_SHAPE)
        self.last: tuple[PodRequest, Sequence[str], bool] | None = None

    # -- besides the row stamps (checked by every change), the topology
    def snapshot(self) -> object:
        return index_wide(self.index), self.index.topology_version

    def changed(self, before: object) -> None:
        wide, topology = before  # type: ignore[misc]
        if index_wide(self.index) != wide:
            assert self.index.topology_version != topology, "index-wide data changed"
        self.check_fit_again("same")  # the pod after this change, as kube-scheduler asks

    @initialize(
        nodes=st.lists(inventories(), min_size=1, max_size=4),
        fillers=st.booleans(),
        shapes=st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=5, unique=True),
        twists=st.lists(st.sampled_from(TWISTS), max_size=3),
    )
    def register(
        self,
        nodes: list[NodeInventory],
        fillers: bool,
        shapes: list[PodRequest],
        twists: list[Callable[[PodRequest], PodRequest]],
    ) -> None:
        self.register_nodes(nodes, fillers)
        self.shapes = shapes + [twist(shapes[0]) for twist in twists]

    @rule(
        data=st.data(),
        # The list of every node most often, as kube-scheduler sends it.
        which=st.sampled_from([0] * 6 + list(range(len(LISTS)))),
        form=st.sampled_from(["same"] * 4 + ["tuple"] * 2 + ["list"]),
        with_exact=st.booleans(),
    )
    def check_fit(self, data: st.DataObject, which: int, form: str, with_exact: bool) -> None:
        """A list as kube-scheduler sends it: the same object again, or decoded afresh
        (an equal tuple gets the same rows array, an equal list does not)."""
        names: Sequence[str] = LISTS[which]
        if form == "list":
            names = list(names)
        elif form == "tuple":
            names = tuple(list(names))
        self._check_fit(data.draw(st.sampled_from(self.shapes)), names, with_exact)

    @rule(form=st.sampled_from(["same", "tuple"]))
    def check_fit_again(self, form: str) -> None:
        """The last fit again, after whatever changed since: the case the cache is for."""
        if self.last is not None:
            request, names, with_exact = self.last
            self._check_fit(request, tuple(list(names)) if form == "tuple" else names, with_exact)

    @rule(
        data=st.data(),
        names=st.lists(st.sampled_from(NAMES + GHOSTS[:2]), min_size=1, max_size=6, unique=True),
    )
    def check_fit_of_some(self, data: st.DataObject, names: list[str]) -> None:
        self._check_fit(data.draw(st.sampled_from(self.shapes)), names, False)

    def _check_fit(self, request: PodRequest, names: Sequence[str], with_exact: bool) -> None:
        index = self.index

        def exact(row: int) -> PodAssignment | Rejection:
            return choose_devices(index, request, index.name_of(row))

        checked_fit(index, request, names, exact if with_exact else None)
        self.last = (request, names, with_exact)

    @invariant()
    def bounded(self) -> None:
        assert len(self.index.fit_cache) <= SHAPES
        assert self.index.fit_cache.lists_held() <= SHAPES * LISTS_PER_SHAPE


RememberedFitMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_remembered_fit_equals_a_fresh_one = RememberedFitMachine.TestCase
