"""The cluster index: registration, columns, apply and release."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.builders import A100, V100, make_assignment, make_index, make_node, use
from vgpu_extender.domain import DeviceGrant, NodeInventory, PodAssignment
from vgpu_extender.engine import AllocationError, ClusterIndex
from vgpu_extender.engine.columns import UNLIMITED

GRIDS = ("mem_free", "cores_free", "slots_free")


def free_of(index: ClusterIndex, node: str) -> dict[str, list[int]]:
    """Per grid, the free values of the node's devices."""
    row = index.row_of(node)
    assert row is not None
    n = len(index.devices(row))
    return {g: getattr(index.cols, g)[row, :n].tolist() for g in GRIDS}


def snapshot(index: ClusterIndex) -> dict[str, np.ndarray]:
    cols = index.cols
    names = (*cols._GRIDS, *cols._VECTORS)
    return {name: getattr(cols, name).copy() for name in names}


# ----------------------------------------------------------------- registration


def test_upsert_fills_the_columns() -> None:
    index = make_index(make_node("a", 2, mem=[8192, 16384], numa=[0, 1], count=4, cores=200))
    row = index.row_of("a")
    assert row is not None
    cols = index.cols
    assert cols.valid[row, :2].tolist() == [True, True]
    assert cols.mem_total[row, :2].tolist() == [8192, 16384]
    assert cols.mem_free[row, :2].tolist() == [8192, 16384]
    assert cols.cores_total[row, :2].tolist() == [200, 200]
    assert cols.slots_total[row, :2].tolist() == [4, 4]
    assert cols.numa[row, :2].tolist() == [0, 1]
    assert cols.type_id[row, :2].tolist() == [index.type_id(A100)] * 2
    assert bool(cols.node_ok[row])
    # Host columns are unlimited unless the inventory tracks them.
    assert int(cols.cpu_free[row]) == UNLIMITED
    assert index.numa_values == (0, 1)
    assert index.types == (A100,)


@pytest.mark.parametrize(
    ("node", "usable"),
    [
        (make_node("a", 3), [True, True, True]),
        (make_node("a", 3, unhealthy=[1]), [True, False, True]),
        (make_node("a", 3, cordoned=[0, 2]), [False, True, False]),
        (make_node("a", 3, problem="annotation unreadable"), [False, False, False]),
    ],
    ids=["all-usable", "unhealthy", "cordoned", "inventory-problem"],
)
def test_usable_mask(node: NodeInventory, usable: list[bool]) -> None:
    index = make_index(node)
    row = index.row_of("a")
    assert row is not None
    assert index.cols.usable[row, :3].tolist() == usable


def test_grows_rows_and_slots_beyond_the_initial_grid() -> None:
    # make_index starts with 4 rows and 2 slots: 9 nodes and 8 devices force both to grow.
    nodes = [make_node(f"n{i}", 8 if i == 8 else 2, mem=1000 + i) for i in range(9)]
    index = make_index(*nodes)
    assert len(index) == 9
    assert index.cols.rows >= 9
    assert index.cols.slots >= 8
    for i in range(9):
        row = index.row_of(f"n{i}")
        assert row is not None
        assert index.cols.mem_total[row, 0] == 1000 + i
    assert index.rows_of(["n8", "nope", "n0"]).tolist() == [
        index.row_of("n8"),
        -1,
        index.row_of("n0"),
    ]


def test_removed_rows_are_recycled_and_cleared() -> None:
    index = make_index(make_node("a", 2), make_node("b", 2))
    use(index, "p1", "a", [(0, 1000, 10)])
    row_a = index.row_of("a")
    assert index.remove_node("a") == ["p1"]
    assert "a" not in index
    assert index.allocation("p1") is None
    assert index.cols.valid[row_a].sum() == 0
    assert index.locate("a-gpu0") is None
    index.upsert_node(make_node("c", 1))
    assert index.row_of("c") == row_a
    assert index.remove_node("missing") == []


def test_reregistration_keeps_allocations_on_remaining_devices() -> None:
    index = make_index(make_node("a", 2))
    use(index, "p1", "a", [(0, 1000, 10), (1, 2000, 20)])
    # Device 1 leaves the node and device 0 grows: p1 keeps only its share of device 0.
    index.upsert_node(make_node("a", 1, mem=16384))
    assert free_of(index, "a") == {
        "mem_free": [16384 - 1000],
        "cores_free": [90],
        "slots_free": [9],
    }
    alloc = index.allocation("p1")
    assert alloc is not None
    assert [slot for slot, _ in alloc.usage] == [0]


def test_duplicate_uuid_is_refused_without_corrupting_state() -> None:
    index = make_index(make_node("a", 2))
    use(index, "p1", "a", [(0, 1000, 10)])
    thief = NodeInventory("b", make_node("a", 1).devices)  # claims a-gpu0
    before = snapshot(index)
    with pytest.raises(AllocationError, match="a-gpu0"):
        index.upsert_node(thief)
    assert "b" not in index
    assert index.locate("a-gpu0") == (index.row_of("a"), 0)
    for name, grid in snapshot(index).items():
        np.testing.assert_array_equal(grid, before[name], err_msg=name)
    # The same holds when an existing node is re-registered with a stolen device.
    index.upsert_node(make_node("b", 1))
    stolen = NodeInventory("b", (*make_node("b", 1).devices, make_node("a", 1).devices[0]))
    with pytest.raises(AllocationError, match="a-gpu0"):
        index.upsert_node(stolen)
    assert index.locate("b-gpu0") == (index.row_of("b"), 0)
    assert len(index.devices(index.row_of("b") or 0)) == 1


def test_set_cordoned() -> None:
    index = make_index(make_node("a", 3))
    index.set_cordoned("a", ["a-gpu1"])
    row = index.row_of("a")
    assert row is not None
    assert index.cols.usable[row, :3].tolist() == [True, False, True]
    assert index.inventory("a").cordoned == frozenset({"a-gpu1"})
    index.set_cordoned("a", [])
    assert index.cols.usable[row, :3].tolist() == [True, True, True]
    with pytest.raises(AllocationError, match="no device b-gpu0"):
        index.set_cordoned("a", ["b-gpu0"])


def test_types_numa_and_version() -> None:
    index = make_index(make_node("a", 2, type=[A100, V100], numa=[0, 3]))
    assert index.types == (A100, V100)
    assert index.type_id(V100) == 1
    assert index.type_id("unknown") == -1
    assert index.numa_values == (0, 3)
    v = index.version
    use(index, "p1", "a", [(0, 1, 1)])
    assert index.version > v
    v = index.version
    index.release("p1")
    assert index.version > v


# ----------------------------------------------------------------- apply and release

APPLY_CASES = [
    pytest.param(
        [[(0, 3000, 30)], [(0, 1000, 10), (1, 500, 5)]],
        (),
        # device 0: 8192-3000-1000 = 4192 MiB, 100-30-10 = 60 cores, 10-2 slots
        {"mem_free": [4192, 7692], "cores_free": [60, 95], "slots_free": [8, 9]},
        id="two-containers-share-a-device",
    ),
    pytest.param(
        [[(0, 6000, 60)], [(0, 1000, 10)], [(0, 2000, 20)]],
        (True, False, False),
        # Init and app containers never run together: device 0 holds
        # max(6000, 1000+2000) = 6000 MiB, max(60, 30) cores, max(1, 2) slots.
        {"mem_free": [2192, 8192], "cores_free": [40, 100], "slots_free": [8, 10]},
        id="init-collapse",
    ),
    pytest.param(
        [[(1, 8192, 100)]],
        (),
        {"mem_free": [8192, 0], "cores_free": [100, 0], "slots_free": [10, 9]},
        id="whole-device",
    ),
]


@pytest.mark.parametrize(("containers", "init", "expected"), APPLY_CASES)
def test_apply_and_release(
    containers: list[list[tuple[int, int, int]]],
    init: tuple[bool, ...],
    expected: dict[str, list[int]],
) -> None:
    index = make_index(make_node("a", 2))
    before = free_of(index, "a")
    assignment = make_assignment("a", *containers, init=init)
    index.apply("p1", assignment)
    assert free_of(index, "a") == expected
    assert [a.pod_uid for a in index.pods_on("a")] == ["p1"]
    assert index.release("p1") == assignment
    assert free_of(index, "a") == before
    assert index.pods_on("a") == []
    assert index.release("p1") is None


def test_host_resources_are_tracked_only_when_known() -> None:
    index = make_index(make_node("a", 1, cpu_milli=4000, memory_mib=8000), make_node("b", 1))
    index.apply("p1", make_assignment("a", [(0, 1, 1)]), cpu_milli=1500, memory_mib=3000)
    index.apply("p2", make_assignment("b", [(0, 1, 1)]), cpu_milli=1500, memory_mib=3000)
    a, b = index.row_of("a"), index.row_of("b")
    assert (int(index.cols.cpu_free[a]), int(index.cols.hostmem_free[a])) == (2500, 5000)
    assert int(index.cols.cpu_free[b]) == UNLIMITED
    with pytest.raises(AllocationError, match="host cpu or memory"):
        index.apply("p3", make_assignment("a", [(0, 1, 1)]), cpu_milli=2501)
    index.release("p1")
    assert (int(index.cols.cpu_free[a]), int(index.cols.hostmem_free[a])) == (4000, 8000)


APPLY_ERRORS = [
    pytest.param("a", [[(0, 8000, 10)]], "memory 8000 MiB > free 7192", id="memory"),
    pytest.param("a", [[(0, 10, 91)]], "cores 91 > free 90", id="cores"),
    pytest.param("b", [[(0, 1, 1)]], "no free allocation slot", id="slots"),
    pytest.param("zz", [[(0, 1, 1)]], "unknown node 'zz'", id="unknown-node"),
    pytest.param("a", [[(7, 1, 1)]], "device a-gpu7 is not on node a", id="unknown-device"),
]


@pytest.mark.parametrize(("node", "containers", "error"), APPLY_ERRORS)
def test_apply_refuses_to_over_allocate(
    node: str, containers: list[list[tuple[int, int, int]]], error: str
) -> None:
    index = make_index(make_node("a", 1), make_node("b", 1, count=1))
    use(index, "held-a", "a", [(0, 1000, 10)])
    use(index, "held-b", "b", [(0, 1, 1)])
    before = snapshot(index)
    with pytest.raises(AllocationError, match=error):
        index.apply("p1", make_assignment(node, *containers))
    assert index.allocation("p1") is None
    for name, grid in snapshot(index).items():
        np.testing.assert_array_equal(grid, before[name], err_msg=name)


def test_apply_twice_and_unchecked_apply() -> None:
    index = make_index(make_node("a", 1))
    use(index, "p1", "a", [(0, 8192, 100)])
    with pytest.raises(AllocationError, match="already holds"):
        use(index, "p1", "a", [(0, 1, 1)])
    # Without the check (importing what a node already runs) the index records the truth.
    index.apply("p2", make_assignment("a", [(0, 1000, 10)]), check=False)
    assert free_of(index, "a") == {"mem_free": [-1000], "cores_free": [-10], "slots_free": [8]}


def test_grant_vendor_and_assignment_round_trip() -> None:
    index = make_index(make_node("a", 1))
    assignment = PodAssignment("a", ((DeviceGrant("a-gpu0", 10, 1),),))
    index.apply("p1", assignment)
    alloc = index.allocation("p1")
    assert alloc is not None
    assert alloc.assignment is assignment
    assert list(index.allocations()) == [alloc]


def test_a_long_candidate_list_keeps_its_rows_while_single_nodes_are_looked_up() -> None:
    index = make_index(*(make_node(f"n{i}", 1) for i in range(40)))
    names = tuple(f"n{i}" for i in range(40))
    rows = index.rows_of(names)
    assert rows.tolist() == list(range(40))
    index.rows_of(["n3"])  # a bind's one-node check in between
    index.rows_of(["n5"])
    assert index.rows_of(names) is rows  # still remembered, found by identity
    assert index.rows_of(list(names)) is not rows  # an equal list of another type: looked up
    index.upsert_node(make_node("n40", 1))  # the topology changed: looked up again
    assert index.rows_of(names) is not rows
    assert index.rows_of(names).tolist() == list(range(40))


# ----------------------------------------------------------------- many new nodes at once


def _many() -> list[NodeInventory]:
    return [
        make_node("n0", 2, mem=[8192, 16384], numa=[0, 1], count=4, cores=200),
        make_node("n1", 3, type=[A100, V100, A100], unhealthy=[1], cordoned=[2]),
        make_node("n2", 1, problem="annotation unreadable"),
        make_node("n3", 12, mem=4096, cpu_milli=8000, memory_mib=65536),  # wider than the grid
        make_node("n4", 0, labels={"zone": "b"}),
    ]


def test_add_nodes_leaves_the_index_as_upserting_each_does() -> None:
    one_by_one = make_index(make_node("old", 2), make_node("gone", 1))
    at_once = make_index(make_node("old", 2), make_node("gone", 1))
    for index in (one_by_one, at_once):
        index.remove_node("gone")  # its row is free again, and taken first
    for inventory in _many():
        one_by_one.upsert_node(inventory)
    at_once.add_nodes(_many())

    expected, got = snapshot(one_by_one), snapshot(at_once)
    assert expected.keys() == got.keys()
    for name, column in expected.items():
        assert np.array_equal(column, got[name]), name
    for inventory in _many():
        assert at_once.row_of(inventory.name) == one_by_one.row_of(inventory.name)
        assert at_once.inventory(inventory.name) == inventory
        row = at_once.row_of(inventory.name)
        assert row is not None
        assert at_once.devices(row) == one_by_one.devices(row)
    assert at_once.types == one_by_one.types
    assert at_once.row_span == one_by_one.row_span


def test_add_nodes_refuses_all_for_one_bad_node() -> None:
    index = make_index(make_node("old", 1))
    before = snapshot(index)
    thief = NodeInventory(name="thief", devices=index.inventory("old").devices)
    for batch in (
        [make_node("fresh", 1), thief],  # a device another node holds
        [make_node("fresh", 1), make_node("old", 1)],  # a node already held
        [make_node("fresh", 1), make_node("fresh", 1)],  # a node listed twice
    ):
        with pytest.raises(AllocationError):
            index.add_nodes(batch)
        assert "fresh" not in index
        after = snapshot(index)
        assert all(np.array_equal(before[name], after[name]) for name in before)
