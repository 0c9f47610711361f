"""Random changes to a ``ClusterIndex`` for stateful property tests of what the engine
remembers: node shapes, request shapes, and a state machine base whose rules register,
cordon, place and release, each change bracketed by a check that every row whose data
changed moved its stamp (and that stamps only grow).

Subclasses add the node registration rules they need and what they check after each
change (``snapshot`` before it, ``changed`` after it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.support.builders import A100, V100, make_container, make_node, make_request
from vgpu_extender.domain import DeviceGrant, NodeInventory, PodAssignment, PodRequest
from vgpu_extender.engine import AllocationError, ClusterIndex, choose_devices

NAMES = [f"n{i}" for i in range(6)]
#: Shapes for a run to draw a few from; some differ in one field only (NUMA binding,
#: cores, host memory).
REQUESTS = [
    make_request(1, mem=3000),
    make_request(1, pct=50, cores=50),
    make_request(1, pct=50),
    make_request(2, mem=1000, numa_bind=True),
    make_request(2, mem=1000),
    make_request(3, pct=25, numa_bind=True),
    make_request(1, cores=100),
    make_request(1, mem=5000, use_types=["A100"]),
    make_request(2, avoid_uuids=["n0-gpu0", "n1-gpu1", "n2-gpu0"]),
    make_request(1, use_uuids=["n2-gpu1", "n3-gpu0", "n5-gpu2"]),
    make_request(
        containers=[make_container(1, mem=3000), make_container(2, pct=25)],
        cpu_milli=1000,
    ),
    make_request(containers=[make_container(1, init=True, mem=6000), make_container(1, mem=2000)]),
    make_request(1, mem=2000, cpu_milli=3000, host_memory_mib=8000),
    make_request(1, mem=2000, cpu_milli=3000, host_memory_mib=12000),
    make_request(containers=[make_container(0)], cpu_milli=3000),  # no devices
]
#: One-field changes to a run's first shape: with two of them drawn, two requests differ
#: in that field only, and nodes reject both (host CPU 4000m, host memory 16 GiB at
#: most; H100 devices) with different verdicts.
TWISTS: list[Callable[[PodRequest], PodRequest]] = [
    lambda r: replace(r, cpu_milli=5000),
    lambda r: replace(r, cpu_milli=6000),
    lambda r: replace(r, host_memory_mib=20000),
    lambda r: replace(r, host_memory_mib=30000),
    lambda r: replace(r, numa_bind=not r.numa_bind),
    lambda r: replace(r, selector=replace(r.selector, avoid_types=("h100",))),
]
#: Plain nodes some runs add, so that the grid is large enough for a changed row to be
#: judged on its own row.
FILLERS = [f"f{i}" for i in range(40)]


@st.composite
def inventories(draw: st.DrawFn) -> NodeInventory:
    gpus = draw(st.sampled_from([0, 1, 2, 3, 3, 9]))

    def per_gpu(values: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(values, min_size=gpus, max_size=gpus))

    return make_node(
        draw(st.sampled_from(NAMES)),
        gpus,
        mem=per_gpu(st.sampled_from([4096, 8192])),
        count=draw(st.integers(1, 3)),
        type=per_gpu(st.sampled_from([A100, V100, "NVIDIA-H100-80GB"])),
        numa=per_gpu(st.integers(0, 2)),
        unhealthy=[i for i, sick in enumerate(per_gpu(st.integers(0, 5))) if sick == 0],
        cordoned=[i for i, off in enumerate(per_gpu(st.integers(0, 5))) if off == 0],
        problem=draw(st.sampled_from(["", "", "", "", "unreadable"])),
        cpu_milli=draw(st.sampled_from([None, 4000])),
        memory_mib=draw(st.sampled_from([None, 16384, 4096])),
    )


def row_states(index: ClusterIndex, rows: int, slots: int) -> list[object]:
    """Everything of each row fit or explain can read: its columns (the first ``slots``
    devices), its node's name and inventory, and its allocations."""
    cols = index.cols
    names = (*cols._GRIDS, *cols._VECTORS)
    grids = set(cols._GRIDS)
    states: list[object] = []
    for row in range(rows):
        cells = tuple(
            getattr(cols, name)[row, :slots].tobytes()
            if name in grids
            else getattr(cols, name)[row].tobytes()
            for name in names
        )
        try:
            name = index.name_of(row)
        except KeyError:
            states.append((cells, None))
            continue
        pods = tuple(index.pods_on(name))
        states.append((cells, name, index.inventory(name), pods))
    return states


class IndexChanges(RuleBasedStateMachine):
    """Rules that change the index; each change goes through ``_change``."""

    def __init__(self) -> None:
        super().__init__()
        self.index = ClusterIndex(initial_nodes=2, initial_slots=2)
        self.pods: list[str] = []
        self.shapes: list[PodRequest] = []
        self.step = 0

    def snapshot(self) -> object:
        """What a subclass checks after a change, taken before it."""
        return None

    def changed(self, before: object) -> None:
        """A subclass's check after a change (``before``: its ``snapshot``)."""

    def _change(self, change: Callable[[], Any]) -> None:
        index = self.index
        rows, slots = index.cols.rows, index.cols.slots
        before, stamps = row_states(index, rows, slots), index.row_stamps.copy()
        taken = self.snapshot()
        try:
            change()
        finally:
            after = row_states(index, rows, slots)
            moved = index.row_stamps[:rows] != stamps
            for row in range(rows):
                if before[row] != after[row]:
                    assert moved[row], f"row {row} changed but kept its stamp"
            assert (index.row_stamps[:rows] >= stamps).all()
        self.changed(taken)

    @rule(name=st.sampled_from(NAMES), picks=st.lists(st.integers(0, 8), max_size=3))
    def cordon(self, name: str, picks: list[int]) -> None:
        if name not in self.index:
            return
        devices = self.index.inventory(name).devices
        uuids = [devices[p % len(devices)].uuid for p in picks] if devices else []
        self._change(lambda: self.index.set_cordoned(name, uuids))

    @rule(name=st.sampled_from(NAMES + FILLERS[:2]), request=st.sampled_from(REQUESTS))
    def place(self, name: str, request: PodRequest) -> None:
        if name not in self.index:
            return
        choice = choose_devices(self.index, request, name)
        if isinstance(choice, PodAssignment):
            self._apply(choice, request.cpu_milli, request.host_memory_mib)

    @rule(
        name=st.sampled_from(NAMES),
        grants=st.lists(
            st.tuples(
                st.integers(0, 8), st.sampled_from([0, 1000, 5000, 9000]), st.integers(0, 60)
            ),
            min_size=1,
            max_size=2,
        ),
    )
    def force(self, name: str, grants: list[tuple[int, int, int]]) -> None:
        """Arbitrary grants: held when they fit, refused (changing nothing) otherwise."""
        if name not in self.index or not self.index.inventory(name).devices:
            return
        gpus = len(self.index.inventory(name).devices)
        held = tuple(DeviceGrant(f"{name}-gpu{g % gpus}", m, c) for g, m, c in grants)
        self._apply(PodAssignment(name, (held,)), 0, 0)

    def _apply(self, assignment: PodAssignment, cpu_milli: int, memory_mib: int) -> None:
        uid = f"pod{self.step}"
        self.step += 1

        def apply() -> None:
            try:
                self.index.apply(uid, assignment, cpu_milli=cpu_milli, memory_mib=memory_mib)
            except AllocationError:
                return
            self.pods.append(uid)

        self._change(apply)

    @rule(which=st.integers(0, 30))
    def release(self, which: int) -> None:
        if self.pods:
            uid = self.pods.pop(which % len(self.pods))
            self._change(lambda: self.index.release(uid))


class TopologyChanges(IndexChanges):
    """``IndexChanges`` plus nodes that register, re-register or go."""

    def register_nodes(self, nodes: list[NodeInventory], fillers: bool) -> None:
        """The starting nodes; with ``fillers``, a grid large enough that a changed row
        is judged on its own row."""
        for node in nodes:
            self.index.upsert_node(node)
        if fillers:
            for name in FILLERS:
                self.index.upsert_node(make_node(name, 2, mem=4096, count=2))

    @rule(node=inventories(), remove=st.booleans())
    def topology(self, node: NodeInventory, remove: bool) -> None:
        """A node registers, re-registers or goes (one rule: rows change more often)."""
        if remove:
            self._change(lambda: self.index.remove_node(node.name))
        else:
            self._change(lambda: self.index.upsert_node(node))
