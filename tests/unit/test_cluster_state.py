"""The cluster state's changes to the index: what an accepted assignment does to a row."""

from __future__ import annotations

from tests.support.builders import make_assignment, make_node
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.vendors import create_vendor


def state() -> ClusterState:
    cluster = ClusterState(vendor=create_vendor("nvidia"))
    cluster.upsert_nodes([make_node("a", 2), make_node("b", 2)])
    return cluster


def stamp(cluster: ClusterState, node: str) -> int:
    row = cluster.index.row_of(node)
    assert row is not None
    return int(cluster.index.row_stamps[row])


def test_applying_the_assignment_already_held_leaves_the_row_alone() -> None:
    cluster = state()
    chosen = make_assignment("a", [(0, 4096, 50)])
    assert cluster.assume("p", chosen)
    before = stamp(cluster, "a")
    # The store accepted what bind assumed; the watch then reports the same again.
    cluster.apply("p", chosen)
    cluster.apply("p", make_assignment("a", [(0, 4096, 50)]))
    assert stamp(cluster, "a") == before
    held = cluster.index.allocation("p")
    assert held is not None and held.assignment == chosen
    assert cluster.index.cols.row_mem_free[cluster.index.row_of("a")] == 2 * 8192 - 4096


def test_another_assignment_replaces_the_held_one() -> None:
    cluster = state()
    cluster.apply("p", make_assignment("a", [(0, 4096, 50)]))
    before_a, before_b = stamp(cluster, "a"), stamp(cluster, "b")
    cluster.apply("p", make_assignment("b", [(1, 2048, 10)]))
    assert stamp(cluster, "a") > before_a and stamp(cluster, "b") > before_b
    index = cluster.index
    assert index.cols.row_mem_free[index.row_of("a")] == 2 * 8192
    assert index.cols.row_mem_free[index.row_of("b")] == 2 * 8192 - 2048
    # Same node, other grants: replaced too.
    cluster.apply("p", make_assignment("b", [(1, 1024, 10)]))
    assert index.cols.row_mem_free[index.row_of("b")] == 2 * 8192 - 1024
