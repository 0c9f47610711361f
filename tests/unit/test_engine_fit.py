"""The vectorised fit: which nodes take a pod now, and a stable reason for every other one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from tests.support.builders import (
    A100,
    V100,
    make_assignment,
    make_container,
    make_index,
    make_node,
    make_request,
    use,
)
from vgpu_extender.domain import NodeInventory, PodRequest, Reason, Rejection
from vgpu_extender.engine import ClusterIndex, by_index, choose_devices, fit
from vgpu_extender.engine.reference import reference_fit
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

Grant = tuple[int, int, int]


@dataclass
class Case:
    nodes: Sequence[NodeInventory]
    request: PodRequest
    #: Expected verdict per candidate: None for feasible, else (message, unresolvable).
    expect: dict[str, tuple[str, bool] | None]
    #: Allocations applied first: (pod uid, node, containers of (device, MiB, cores)).
    held: Sequence[tuple[str, str, Sequence[Sequence[Grant]]]] = field(default_factory=tuple)
    #: Host CPU (milli) held by some of those pods.
    held_cpu: dict[str, int] = field(default_factory=dict)


def build(case: Case) -> ClusterIndex:
    index = make_index(*case.nodes)
    for uid, node, containers in case.held:
        assignment = make_assignment(node, *containers)
        index.apply(uid, assignment, cpu_milli=case.held_cpu.get(uid, 0))
    return index


WHOLE = (8192, 100)  # a whole 8 GiB device: all its memory and cores

CASES = [
    pytest.param(
        Case([make_node("a", 2)], make_request(1, mem=1000, cores=10), {"a": None}),
        id="fits",
    ),
    pytest.param(
        Case(
            [make_node("a", 1)],
            make_request(1, mem=2000, cores=10),
            # 8192 - 7000 = 1192 MiB free; releasing the 7000 MiB pod would help.
            {"a": ("insufficient gpumem: need 2000 MiB, best free 1192 MiB", False)},
            held=[("p", "a", [[(0, 7000, 10)]])],
        ),
        id="memory-now",
    ),
    pytest.param(
        Case(
            [make_node("a", 1)],
            make_request(1, mem=9000),
            {"a": ("insufficient gpumem: need 9000 MiB, best free 8192 MiB", True)},
        ),
        id="memory-never",
    ),
    pytest.param(
        Case(
            [make_node("a", 3)],
            make_request(2, mem=2000),
            # Free 8192, 1192, 1192: the second-best device offers only 1192 MiB.
            {"a": ("insufficient gpumem: need 2000 MiB, best free 1192 MiB (on 2 gpus)", False)},
            held=[("p", "a", [[(1, 7000, 10), (2, 7000, 10)]])],
        ),
        id="memory-on-two-gpus",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, mem=[8192, 16384])],
            make_request(2, pct=50),
            # 50 % is 4096 of 8192 and 8192 of 16384; 16384 - 5000 = 11384 >= 8192.
            {"a": None},
            held=[("p", "a", [[(1, 5000, 10)]])],
        ),
        id="percent-memory-fits",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, mem=16384)],
            make_request(1, pct=75),
            # 75 % of 16384 = 12288 > 16384 - 5000 = 11384.
            {"a": ("insufficient gpumem: need 12288 MiB, best free 11384 MiB", False)},
            held=[("p", "a", [[(0, 5000, 10)]])],
        ),
        id="percent-memory-now",
    ),
    pytest.param(
        Case(
            [make_node("a", 1)],
            make_request(1, mem=100, cores=10),
            {"a": ("insufficient gpucores: need 10 percent, best free 5 percent", False)},
            held=[("p", "a", [[(0, 100, 95)]])],
        ),
        id="cores-now",
    ),
    pytest.param(
        Case(
            [make_node("a", 1)],
            make_request(1, mem=100, cores=0),
            # HAMi: a request with no cores cannot land on a device whose cores are all used.
            {"a": ("no compute left on any GPU", False)},
            held=[("p", "a", [[(0, 100, 100)]])],
        ),
        id="zero-cores-on-full-device",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, count=2)],
            make_request(1, mem=100, cores=1),
            # Split count 2, both allocations taken.
            {"a": ("insufficient gpu slots: need 1, have 0", False)},
            held=[("p1", "a", [[(0, 100, 1)]]), ("p2", "a", [[(0, 100, 1)]])],
        ),
        id="split-count",
    ),
    pytest.param(
        Case(
            [make_node("a", 1)],
            make_request(1, mem=100, cores=100),
            {"a": ("exclusive gpu conflict: need 1, have 0", False)},
            held=[("p", "a", [[(0, 100, 1)]])],
        ),
        id="exclusive-conflict",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, type=V100), make_node("b", 2, type=[V100, A100])],
            make_request(1, mem=100, use_types=["A100"]),
            {"a": ("gpu type mismatch: need 1, have 0", True), "b": None},
        ),
        id="use-type",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, type=V100), make_node("b", 2)],
            make_request(2, mem=100, avoid_types=["v100"]),
            {"a": ("gpu type mismatch: need 2, have 0", True), "b": None},
        ),
        id="avoid-type",
    ),
    pytest.param(
        Case(
            [make_node("a", 2), make_node("b", 2)],
            make_request(1, mem=100, use_uuids=["b-gpu1"]),
            {"a": ("gpu uuid mismatch: need 1, have 0", True), "b": None},
        ),
        id="use-uuid",
    ),
    pytest.param(
        Case(
            [make_node("a", 2), make_node("b", 2)],
            make_request(2, mem=100, avoid_uuids=["a-gpu0"]),
            {"a": ("gpu uuid mismatch: need 2, have 1", True), "b": None},
        ),
        id="avoid-uuid",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, unhealthy=[1])],
            make_request(2, mem=100),
            {"a": ("unhealthy devices: need 2, have 1", True)},
        ),
        id="unhealthy",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, cordoned=[0])],
            make_request(2, mem=100),
            {"a": ("cordoned devices: need 2, have 1", True)},
        ),
        id="cordoned",
    ),
    pytest.param(
        Case(
            [make_node("a", 2), make_node("b", 0)],
            make_request(3, mem=100),
            {"a": ("not enough gpus: need 3, have 2", True), "b": ("no devices", True)},
        ),
        id="too-few-devices",
    ),
    pytest.param(
        Case(
            [make_node("a", 2, problem="annotation hami.io/node-nvidia-register is empty")],
            make_request(1, mem=100),
            {
                "a": (
                    "no usable device inventory: annotation hami.io/node-nvidia-register is empty",
                    True,
                )
            },
        ),
        id="inventory-problem",
    ),
    pytest.param(
        Case([make_node("a", 1)], make_request(1), {"ghost": ("node unregistered", True)}),
        id="unknown-node",
    ),
    pytest.param(
        Case(
            [make_node("a", 4, numa=[0, 0, 1, 1]), make_node("b", 4, numa=[0, 1, 1, 1])],
            make_request(3, mem=100, numa_bind=True),
            {"a": ("numa mismatch: 3 gpus on one numa node", True), "b": None},
        ),
        id="numa-never",
    ),
    pytest.param(
        Case(
            [make_node("a", 4, numa=[0, 0, 1, 1])],
            make_request(2, mem=1000, numa_bind=True),
            # Devices 0 and 2 are full: each NUMA node has one free device, and the best
            # pair on one NUMA node offers min(0, 8192) = 0 MiB.
            {"a": ("insufficient gpumem: need 1000 MiB, best free 0 MiB (on 2 gpus)", False)},
            held=[("p", "a", [[(0, *WHOLE), (2, *WHOLE)]])],
        ),
        id="numa-now",
    ),
    pytest.param(
        Case(
            [make_node("a", 4, numa=[0, 0, 1, 1])],
            make_request(2, mem=1000, numa_bind=True),
            {"a": None},
            held=[("p", "a", [[(0, *WHOLE), (1, *WHOLE)]])],
        ),
        id="numa-fits-on-the-other-node",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, cpu_milli=4000, memory_mib=8000), make_node("b", 1)],
            make_request(1, mem=100, cpu_milli=3000),
            # 4000 - 2000 = 2000m free; node b does not track host resources.
            {"a": ("insufficient cpu: need 3000m, best free 2000m", False), "b": None},
            held=[("p", "a", [[(0, 100, 1)]])],
            held_cpu={"p": 2000},
        ),
        id="host-cpu",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, cpu_milli=4000, memory_mib=8000)],
            make_request(1, mem=100, host_memory_mib=9000),
            {"a": ("insufficient memory: need 9000 MiB, best free 8000 MiB", True)},
        ),
        id="host-memory-never",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, cpu_milli=1000)],
            make_request(0, cpu_milli=2000),
            # A pod without devices still needs host room where the engine tracks it.
            {"a": ("insufficient cpu: need 2000m, best free 1000m", True)},
        ),
        id="host-cpu-without-devices",
    ),
    pytest.param(
        Case(
            [make_node("a", 1, problem="unreadable"), make_node("b", 0)],
            make_request(0),
            # No device asked: device inventory does not matter.
            {"a": None, "b": None, "ghost": ("node unregistered", True)},
        ),
        id="no-devices-asked",
    ),
    pytest.param(
        Case(
            [make_node("a", 2)],
            make_request(
                containers=[
                    make_container(1, mem=5000, cores=10, name="x"),
                    make_container(2, mem=1000, cores=100, name="y"),
                ]
            ),
            # Each container fits alone, but y needs both devices exclusively and x takes one.
            {"a": ("exclusive gpu conflict", False)},
        ),
        id="containers-do-not-fit-together",
    ),
    pytest.param(
        Case(
            [make_node("a", 2)],
            make_request(
                containers=[
                    make_container(2, mem=6000, cores=60, init=True, name="init"),
                    make_container(1, mem=5000, cores=30, name="x"),
                    make_container(1, mem=3000, cores=30, name="y"),
                ]
            ),
            # The init container runs alone before x and y, which share the two devices.
            {"a": None},
        ),
        id="init-container-sized-alone",
    ),
    pytest.param(
        Case(
            [make_node("a", 2)],
            make_request(
                containers=[
                    make_container(1, mem=9000, name="x"),
                    make_container(3, mem=100, name="y"),
                ]
            ),
            # The first container that cannot fit alone explains the node.
            {"a": ("insufficient gpumem: need 9000 MiB, best free 8192 MiB", True)},
        ),
        id="first-failing-container",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_fit(case: Case) -> None:
    index = build(case)
    names = list(case.expect)
    result = fit(
        index,
        case.request,
        names,
        exact=lambda row: choose_devices(index, case.request, index.name_of(row), by_index),
    )
    assert result.feasible == [n for n, v in case.expect.items() if v is None]
    assert result.rows.tolist() == [index.row_of(n) for n in result.feasible]
    got = {n: (r.message(NVIDIA_WORDING), r.unresolvable) for n, r in result.rejections.items()}
    want = {n: v for n, v in case.expect.items() if v is not None}
    assert got.keys() == want.keys()
    for name, (message, unresolvable) in want.items():
        assert got[name][0].startswith(message), name
        assert got[name][1] == unresolvable, name
    # The plain reference agrees on which nodes fit.
    assert reference_fit(index, case.request, names) == result.feasible


def test_feasible_keeps_input_order_and_duplicates() -> None:
    index = make_index(*(make_node(n, 1) for n in "abc"))
    use(index, "p", "b", [(0, 8192, 100)])
    result = fit(index, make_request(1, mem=100), ["c", "b", "a", "c", "x"])
    assert result.feasible == ["c", "a", "c"]
    assert result.rows.tolist() == [index.row_of("c"), index.row_of("a"), index.row_of("c")]
    assert set(result.rejections) == {"b", "x"}


def test_empty_index_rejects_every_name() -> None:
    result = fit(make_index(), make_request(1, mem=1), ["a", "b"])
    assert result.feasible == []
    assert {n: r.reason for n, r in result.rejections.items()} == {
        "a": Reason.UNKNOWN_NODE,
        "b": Reason.UNKNOWN_NODE,
    }


def test_all_feasible_and_empty_candidates() -> None:
    index = make_index(make_node("a", 1), make_node("b", 1))
    assert fit(index, make_request(1, mem=1), ["b", "a"]).feasible == ["b", "a"]
    empty = fit(index, make_request(1, mem=1), [])
    assert (empty.feasible, empty.rows.tolist(), empty.rejections) == ([], [], {})


def test_identical_rejections_read_identically() -> None:
    # kube-scheduler groups identical reason strings: equal situations give equal text.
    index = make_index(*(make_node(f"n{i}", 2) for i in range(5)))
    for i in range(5):
        use(index, f"p{i}", f"n{i}", [(0, 8000, 50), (1, 8000, 50)])
    result = fit(index, make_request(1, mem=1000), [f"n{i}" for i in range(5)])
    assert {r.message(NVIDIA_WORDING) for r in result.rejections.values()} == {
        "insufficient gpumem: need 1000 MiB, best free 192 MiB"
    }


def test_fit_reads_current_state_after_apply_and_release() -> None:
    index = make_index(make_node("a", 1))
    request = make_request(1, mem=5000)
    assert fit(index, request, ["a"]).feasible == ["a"]
    use(index, "p", "a", [(0, 4000, 10)])
    assert fit(index, request, ["a"]).rejections["a"].reason is Reason.MEMORY
    index.release("p")
    assert fit(index, request, ["a"]).feasible == ["a"]


MESSAGES = [
    (Rejection(Reason.UNKNOWN_NODE, unresolvable=True), "node unregistered"),
    (
        Rejection(Reason.MEMORY, 4000, 2048),
        "insufficient gpumem: need 4000 MiB, best free 2048 MiB",
    ),
    (
        Rejection(Reason.CORES, 30, 20, detail="on 2 gpus"),
        "insufficient gpucores: need 30 percent, best free 20 percent (on 2 gpus)",
    ),
    (Rejection(Reason.SLOTS, 2, 1), "insufficient gpu slots: need 2, have 1"),
    (Rejection(Reason.CPU, 3000, 2000), "insufficient cpu: need 3000m, best free 2000m"),
    (Rejection(Reason.INVENTORY, detail="bad json"), "no usable device inventory: bad json"),
]


@pytest.mark.parametrize(
    ("rejection", "message"),
    MESSAGES,
    ids=["unknown-node", "memory", "cores-with-detail", "slots", "cpu", "detail-only"],
)
def test_rejection_messages(rejection: Rejection, message: str) -> None:
    assert rejection.message(NVIDIA_WORDING) == message


def busy_cluster(nodes: int, seed: int) -> ClusterIndex:
    """Nodes of 8 devices (two NUMA nodes, 8 or 16 GiB) holding random shares."""
    import random

    rng = random.Random(seed)
    index = make_index(
        *(
            make_node(f"n{i}", 8, mem=rng.choice([8192, 16384]), numa=[0] * 4 + [1] * 4)
            for i in range(nodes)
        )
    )
    for i in range(nodes):
        for g in range(8):
            if rng.random() < 0.9:
                whole = rng.random() < 0.3
                share = (g, rng.choice([2048, 4096, 6144]), rng.choice([30, 60]))
                use(index, f"p{i}-{g}", f"n{i}", [(g, 8192, 100) if whole else share])
    return index


LARGE_REQUESTS = [
    pytest.param(make_request(1, mem=12000, cores=50), id="one-share"),
    pytest.param(make_request(8, pct=100, cores=100), id="eight-whole"),
    pytest.param(make_request(4, pct=60, cores=20), id="four-percent"),
    pytest.param(make_request(3, mem=2000, cores=50, numa_bind=True), id="numa-bound"),
]


@pytest.fixture(scope="module")
def busy() -> ClusterIndex:
    return busy_cluster(3000, seed=5)


@pytest.mark.parametrize("request_", LARGE_REQUESTS)
def test_many_rejections_explain_like_few(busy: ClusterIndex, request_: PodRequest) -> None:
    # Over more than a thousand rejected nodes the reasons are worked out over the whole
    # grid; for a few nodes, on gathered rows. Both must give every node the same verdict.
    index = busy
    names = index.node_names()
    together = fit(index, request_, names)
    assert len(together.rejections) > 1100, len(together.rejections)
    for start in range(0, len(names), 50):
        alone = fit(index, request_, names[start : start + 50])
        for name, rejection in alone.rejections.items():
            assert together.rejections[name] == rejection, name
        assert set(alone.feasible) <= set(together.feasible)
