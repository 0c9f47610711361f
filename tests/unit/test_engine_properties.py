"""Properties of the engine on random clusters and requests (hypothesis).

- No sequence of apply and release over-allocates memory, cores or slots on any device,
  and a refused apply changes nothing.
- The columns depend only on the allocations held: releasing restores the exact state.
- The vectorised fit agrees with the plain reference loop, and with the exact device
  choice on every node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.builders import A100, V100, make_container, make_node, make_request
from vgpu_extender.domain import (
    ContainerRequest,
    DeviceGrant,
    NodeInventory,
    PodAssignment,
    PodRequest,
)
from vgpu_extender.engine import (
    AllocationError,
    ClusterIndex,
    by_index,
    choose_devices,
    fit,
)
from vgpu_extender.engine.framework import Planner, ProfileConfig
from vgpu_extender.engine.reference import reference_fit
from vgpu_extender.policies import default_profile
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

PROPERTY_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ----------------------------------------------------------------- strategies


@st.composite
def nodes(draw: st.DrawFn, name: str) -> NodeInventory:
    gpus = draw(st.integers(0, 4))
    per_gpu = st.lists(st.integers(0, 1), min_size=gpus, max_size=gpus)
    return make_node(
        name,
        gpus,
        mem=draw(st.lists(st.sampled_from([4096, 8192]), min_size=gpus, max_size=gpus)),
        count=draw(st.integers(1, 4)),
        type=[A100 if t else V100 for t in draw(per_gpu)],
        numa=draw(per_gpu),
        unhealthy=[i for i in range(gpus) if draw(st.integers(0, 9)) == 0],
        cordoned=[i for i in range(gpus) if draw(st.integers(0, 9)) == 0],
        problem=draw(st.sampled_from(["", "", "", "", "unreadable"])),
        cpu_milli=draw(st.sampled_from([None, 4000])),
    )


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeInventory]:
    count = draw(st.integers(1, 4))
    return [draw(nodes(f"n{i}")) for i in range(count)]


def containers(init: bool = False) -> st.SearchStrategy[ContainerRequest]:
    return st.builds(
        make_container,
        st.integers(0 if init else 1, 3),
        mem=st.sampled_from([0, 1000, 3000, 5000]),
        pct=st.sampled_from([0, 25, 50, 100]),
        cores=st.sampled_from([0, 10, 50, 100]),
        init=st.just(init),
    )


@st.composite
def requests(draw: st.DrawFn, uid: str = "pod") -> PodRequest:
    shapes = draw(st.lists(containers(init=True), max_size=1))
    shapes += draw(st.lists(containers(), min_size=1, max_size=2))
    uuids = [f"n{i}-gpu{j}" for i in range(4) for j in range(4)]
    return make_request(
        containers=[
            ContainerRequest(f"c{i}", c.count, c.memory_mib, c.memory_percent, c.cores, init=c.init)
            for i, c in enumerate(shapes)
        ],
        uid=uid,
        use_types=draw(st.sampled_from([(), ("A100",)])),
        avoid_uuids=draw(st.lists(st.sampled_from(uuids), max_size=2)),
        numa_bind=draw(st.booleans()),
        cpu_milli=draw(st.sampled_from([0, 0, 1000, 3000])),
    )


@dataclass
class Apply:
    node: int
    request: PodRequest


@dataclass
class Force:
    """An arbitrary, possibly over-allocating assignment: apply must refuse or hold it."""

    node: int
    grants: list[tuple[int, int, int]]
    init: bool


@dataclass
class Release:
    which: int


operations = st.lists(
    st.one_of(
        st.builds(Apply, st.integers(0, 3), requests()),
        st.builds(
            Force,
            st.integers(0, 3),
            st.lists(
                st.tuples(st.integers(0, 3), st.integers(0, 9000), st.integers(0, 120)),
                min_size=1,
                max_size=3,
            ),
            st.booleans(),
        ),
        st.builds(Release, st.integers(0, 20)),
    ),
    max_size=12,
)

# ----------------------------------------------------------------- helpers


def build(cluster: list[NodeInventory]) -> ClusterIndex:
    index = ClusterIndex(initial_nodes=2, initial_slots=2)
    for node in cluster:
        index.upsert_node(node)
    return index


def with_earlier_pods(
    index: ClusterIndex, cluster: list[NodeInventory], earlier: list[PodRequest]
) -> ClusterIndex:
    """``index`` with each of ``earlier`` placed, where it fits, on the cluster's nodes in
    turn."""
    for i, pod in enumerate(earlier):
        verdict = choose_devices(index, pod, cluster[i % len(cluster)].name)
        if isinstance(verdict, PodAssignment):
            index.apply(f"p{i}", verdict, cpu_milli=pod.cpu_milli)
    return index


def columns(index: ClusterIndex) -> dict[str, np.ndarray]:
    cols = index.cols
    return {name: getattr(cols, name).copy() for name in (*cols._GRIDS, *cols._VECTORS)}


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def assert_within_capacity(index: ClusterIndex) -> None:
    cols = index.cols
    valid = cols.valid
    for free, total in (
        (cols.mem_free, cols.mem_total),
        (cols.cores_free, cols.cores_total),
        (cols.slots_free, cols.slots_total),
    ):
        assert (free[valid] >= 0).all()
        assert (free[valid] <= total[valid]).all()
    assert (cols.cpu_free >= 0).all()


def forced(index: ClusterIndex, op: Force, cluster: list[NodeInventory]) -> PodAssignment:
    node = cluster[op.node % len(cluster)]
    gpus = max(len(node.devices), 1)
    grants = tuple(DeviceGrant(f"{node.name}-gpu{g % gpus}", m, c) for g, m, c in op.grants)
    if op.init:  # an init container and an app container with the same grants
        return PodAssignment(node.name, (grants, grants), (True, False))
    return PodAssignment(node.name, (grants,))


# ----------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(clusters(), operations)
def test_apply_and_release_never_over_allocate(
    cluster: list[NodeInventory], ops: list[Apply | Force | Release]
) -> None:
    index = build(cluster)
    held: list[str] = []
    for step, op in enumerate(ops):
        uid = f"pod{step}"
        if isinstance(op, Release):
            if held:
                gone = held.pop(op.which % len(held))
                assert index.release(gone) is not None
            continue
        if isinstance(op, Apply):
            node = cluster[op.node % len(cluster)].name
            verdict = choose_devices(index, op.request, node)
            if not isinstance(verdict, PodAssignment):
                continue
            # What the engine chose always fits.
            index.apply(uid, verdict, cpu_milli=op.request.cpu_milli)
            held.append(uid)
        else:
            before = columns(index)
            try:
                index.apply(uid, forced(index, op, cluster))
            except AllocationError:
                assert_same(before, columns(index))  # refused: nothing changed
            else:
                held.append(uid)
        assert_within_capacity(index)
    assert sorted(a.pod_uid for a in index.allocations()) == sorted(held)


@PROPERTY_SETTINGS
@given(clusters(), st.lists(requests(), min_size=1, max_size=6), st.data())
def test_columns_depend_only_on_what_is_held(
    cluster: list[NodeInventory], pods: list[PodRequest], data: st.DataObject
) -> None:
    index = build(cluster)
    empty = columns(index)
    placed: dict[str, tuple[PodAssignment, int]] = {}
    for i, request in enumerate(pods):
        node = cluster[i % len(cluster)].name
        verdict = choose_devices(index, request, node)
        if isinstance(verdict, PodAssignment):
            before = columns(index)
            index.apply(f"p{i}", verdict, cpu_milli=request.cpu_milli)
            placed[f"p{i}"] = (verdict, request.cpu_milli)
            if data.draw(st.booleans(), label="release at once"):
                assert index.release(f"p{i}") == verdict
                assert_same(before, columns(index))
                del placed[f"p{i}"]
    # Release a random part; the columns equal a fresh index holding only the rest.
    gone = data.draw(
        st.lists(st.sampled_from(sorted(placed)), unique=True) if placed else st.just([])
    )
    for uid in gone:
        index.release(uid)
    fresh = build(cluster)
    for uid, (assignment, cpu) in placed.items():
        if uid not in gone:
            fresh.apply(uid, assignment, cpu_milli=cpu)
    assert_same(columns(fresh), columns(index))
    for uid in sorted(set(placed) - set(gone)):
        index.release(uid)
    assert_same(empty, columns(index))


@PROPERTY_SETTINGS
@given(clusters(), st.lists(requests(), max_size=4), requests())
def test_fit_agrees_with_reference_and_device_choice(
    cluster: list[NodeInventory], earlier: list[PodRequest], request: PodRequest
) -> None:
    index = with_earlier_pods(build(cluster), cluster, earlier)
    names = [n.name for n in cluster] + ["ghost"]
    result = fit(
        index,
        request,
        names,
        exact=lambda row: choose_devices(index, request, index.name_of(row), by_index),
    )
    assert result.feasible == reference_fit(index, request, names)
    assert set(result.feasible) | set(result.rejections) == set(names)
    assert not set(result.feasible) & set(result.rejections)
    for name in names:
        chosen = choose_devices(index, request, name)
        # The vectorised verdict is exact: the device choice succeeds exactly where it fits.
        assert isinstance(chosen, PodAssignment) == (name in result.feasible), name
    for name, rejection in result.rejections.items():
        assert rejection.message(NVIDIA_WORDING)
        if rejection.unresolvable:
            # Unresolvable: the pod does not fit even with every allocation released.
            empty = build(cluster)
            assert not isinstance(choose_devices(empty, request, name), PodAssignment), name


@given(clusters(), st.lists(requests(), max_size=4), requests())
def test_fit_of_one_node_in_a_large_grid_agrees_with_the_reference(
    cluster: list[NodeInventory], earlier: list[PodRequest], request: PodRequest
) -> None:
    # Idle nodes fill the grid, so a single candidate is judged on its own row (bind's
    # case), not over the whole grid.
    fillers = [make_node(f"idle{i}", 1) for i in range(40)]
    index = with_earlier_pods(build(cluster + fillers), cluster, earlier)
    for name in [n.name for n in cluster]:
        one = fit(
            index,
            request,
            [name],
            exact=lambda row: choose_devices(index, request, index.name_of(row), by_index),
        )
        assert one.feasible == reference_fit(index, request, [name]), name
        assert (name in one.rejections) != (name in one.feasible), name


@PROPERTY_SETTINGS
@given(
    clusters(),
    st.lists(requests(), max_size=4),
    requests(),
    st.booleans(),
    st.sampled_from(["spread", "binpack"]),
)
def test_bind_placement_agrees_with_filter(
    cluster: list[NodeInventory],
    earlier: list[PodRequest],
    request: PodRequest,
    require_label: bool,
    device_policy: str,
) -> None:
    # Bind places a pod by the device choice alone and asks filter only when that
    # fails: sound only because the two agree on every node.
    index = with_earlier_pods(build(cluster), cluster, earlier)
    config = ProfileConfig(
        device_rank=device_policy, filters=("label-priority",) if require_label else ()
    )
    planner = Planner(index, default_profile(config))
    for name in [n.name for n in cluster] + ["ghost"]:
        placed = planner.place(request, name)
        verdict = planner.filter(request, [name])
        if name in verdict.feasible:
            assert placed == planner.choose(request, name), name
        else:
            assert placed == verdict.rejections[name], name
