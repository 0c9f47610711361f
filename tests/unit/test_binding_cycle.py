"""The binding service alone, over in-memory ports: reserve, commit, publish, unreserve.

One node with one GPU of 16,384 MiB unless a test says otherwise; pods ask for shares
of it. The store fake re-checks every reservation with the store's own rule, so a
test can tell the index's view from what is committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from tests.support.bind_fakes import BOUND, RESERVED, FakeBindStore, FakePublisher
from tests.support.builders import make_node, make_request
from vgpu_extender import store
from vgpu_extender.domain import NodeInventory, PodAssignment
from vgpu_extender.kube import EventType
from vgpu_extender.services.bind_ports import BindPublisher
from vgpu_extender.services.bind_publisher import StandalonePublisher
from vgpu_extender.services.binding import NO_CLAIM, BindingService, BindRequest
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.pod_cache import PodCache
from vgpu_extender.vendors import create_vendor

NODE = "n1"
GPU = f"{NODE}-gpu0"
GPU_MIB = 16384


@dataclass
class Events:
    recorded: list[tuple[str, str, str, EventType]] = field(default_factory=list)

    def record(
        self,
        *,
        namespace: str,
        pod: str,
        uid: str,
        reason: str,
        message: str,
        type: EventType = "Normal",
    ) -> None:
        self.recorded.append((uid, reason, message, type))

    def reasons(self, uid: str) -> list[tuple[str, EventType]]:
        return [(reason, type) for u, reason, _, type in self.recorded if u == uid]


@dataclass
class Rig:
    cluster: ClusterState
    store: FakeBindStore
    publisher: BindPublisher
    pods: PodCache
    events: Events
    service: BindingService

    @property
    def kube(self) -> FakePublisher:
        assert isinstance(self.publisher, FakePublisher)
        return self.publisher

    def pod(self, name: str, mem: int, *, seen: bool = True) -> BindRequest:
        """A pod asking for ``mem`` MiB of one GPU, seen at filter (cached) by default."""
        request = replace(make_request(1, mem=mem, uid=f"uid-{name}"), name=name)
        if seen:
            self.pods.put(request)
        if isinstance(self.publisher, FakePublisher):
            self.publisher.add_pod("default", name, request.uid)
        return BindRequest(pod_name=name, namespace="default", uid=request.uid, node=NODE)

    def bind(self, args: BindRequest) -> str:
        """What the route does: claim on arrival, then bind."""
        return self.service.bind(args, self.service.claim(args))

    def held(self, uid: str) -> PodAssignment | None:
        allocation = self.cluster.index.allocation(uid)
        return None if allocation is None else allocation.assignment


def rig(
    *,
    standalone: bool = False,
    nodes: tuple[NodeInventory, ...] = (make_node(NODE, 1, mem=GPU_MIB),),
    check_window_s: float = 0.0,
) -> Rig:
    cluster = ClusterState(vendor=create_vendor("nvidia"))
    cluster.upsert_nodes(nodes)
    fake_store = FakeBindStore(cluster, nodes)
    publisher: BindPublisher = StandalonePublisher(cluster) if standalone else FakePublisher()
    pods = PodCache(max_size=100, ttl_s=600.0)
    events = Events()
    service = BindingService(
        cluster=cluster,
        pod_cache=pods,
        store=fake_store,
        publisher=publisher,
        events=events,
        success_events=True,
        check_window_s=check_window_s,
    )
    return Rig(cluster, fake_store, publisher, pods, events, service)


def test_a_bind_reserves_commits_and_publishes_with_the_devices_annotated() -> None:
    r = rig()
    args = r.pod("a", 10_000)

    claim = r.service.claim(args)
    assert claim.assignment is not None and claim.assumed
    assert r.held(args.uid) == claim.assignment  # the next filters see the GPU taken
    assert r.service.bind(args, claim) == ""

    assert r.store.commits == [[args.uid]]
    assert r.store.state(args.uid) == BOUND and r.store.marked == [args.uid]
    assert r.kube.bound_to("default", "a") == NODE
    vendor = r.cluster.vendors.primary
    annotations = r.kube.annotations_of("default", "a")
    assert annotations[vendor.node_annotation] == NODE
    assert GPU in annotations[vendor.assignment_annotation]
    assert r.held(args.uid) == claim.assignment
    assert r.pods.get(args.uid) is None  # done with: the cache forgets it
    assert r.events.reasons(args.uid) == [("BindingSucceed", "Normal")]


def test_a_store_refusal_gives_the_claimed_devices_back_to_the_index() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.store.refuse(
        args.uid, store.AlreadyAllocated(args.uid, node=NODE, state=BOUND, operation="reserve")
    )
    claim = r.service.claim(args)
    assert r.held(args.uid) is not None

    error = r.service.bind(args, claim)

    assert error == f"bind default/a: pod {args.uid} already has bound allocations on node {NODE}"
    assert r.held(args.uid) is None
    assert r.store.state(args.uid) is None
    assert r.kube.posted() == []
    # The GPU is free for the next pod.
    assert r.bind(r.pod("b", 10_000)) == ""


def test_a_node_changed_by_another_replica_is_learnt_and_the_pod_placed_again() -> None:
    r = rig(nodes=(make_node(NODE, 2, mem=GPU_MIB),))
    args = r.pod("a", 10_000)
    request = r.pods.get(args.uid)
    assert request is not None
    first = r.cluster.planner.place(request, NODE)
    assert isinstance(first, PodAssignment)
    # Another replica filled the device this replica's index would choose.
    r.store.write_behind_the_index("uid-other", first)

    assert r.bind(args) == ""

    assert r.store.learnt == [NODE]
    assert r.store.commits == [[args.uid], [args.uid]]
    held = r.held(args.uid)
    assert held is not None and held.device_uuids != first.device_uuids
    assert r.held("uid-other") == first  # the index learnt the other replica's pod
    assert r.store.overcommitted() == []


def test_a_failed_binding_deletes_the_rows_and_frees_the_index() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("fail")

    error = r.bind(args)

    assert error == "bind default/a to n1: Internal error occurred: etcd is away"
    assert r.store.deleted == [args.uid] and r.store.state(args.uid) is None
    assert r.held(args.uid) is None
    assert r.store.marked == []
    assert r.events.reasons(args.uid) == [("BindingFailed", "Warning")]
    assert r.pods.get(args.uid) is not None  # kept for kube-scheduler's retry
    assert r.bind(r.pod("b", 10_000)) == ""


def test_bound_here_by_someone_else_the_bind_stands_with_our_annotations() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("already-here")

    assert r.bind(args) == ""

    assert ("annotate", "default/a") in r.kube.calls
    key = r.cluster.vendors.primary.assignment_annotation
    assert GPU in r.kube.annotations_of("default", "a")[key]
    assert r.store.state(args.uid) == BOUND


def test_an_unknown_outcome_read_back_bound_stands() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("unknown-bound")

    assert r.bind(args) == ""

    assert ("read_pod", "default/a") in r.kube.calls
    assert r.store.state(args.uid) == BOUND
    assert r.held(args.uid) is not None
    assert r.kube.posted() == ["default/a"]  # read back, never sent again


def test_an_unknown_outcome_read_back_bound_without_our_annotations_writes_them() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("unknown-foreign")

    assert r.bind(args) == ""

    assert ("annotate", "default/a") in r.kube.calls
    key = r.cluster.vendors.primary.assignment_annotation
    assert GPU in r.kube.annotations_of("default", "a")[key]
    assert r.store.state(args.uid) == BOUND


def test_an_unknown_outcome_read_back_unbound_is_undone() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("unknown-unbound")

    error = r.bind(args)

    assert error.startswith("bind default/a to n1: the server's answer was lost"), error
    assert error.endswith("; the pod is not bound")
    assert r.store.state(args.uid) is None and r.held(args.uid) is None
    assert r.events.reasons(args.uid) == [("BindingFailed", "Warning")]


def test_an_unknown_outcome_that_cannot_be_read_back_keeps_the_devices_reserved() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.kube.next_binding("unknown-bound")
    r.kube.unreadable = True

    error = r.bind(args)

    assert "outcome unknown" in error and "cannot be read back" in error, error
    assert r.store.state(args.uid) == RESERVED  # for the reconcile to settle
    assert r.held(args.uid) is not None
    assert r.store.marked == [] and r.store.deleted == []
    # The next pod cannot have the GPU.
    assert r.bind(r.pod("b", 10_000)) != ""
    assert r.store.overcommitted() == []


def test_unreserve_twice_is_harmless(monkeypatch: pytest.MonkeyPatch) -> None:
    r = rig()
    undone: list[Any] = []
    unreserve = r.service._unreserve

    def spy(pending: Any) -> None:
        undone.append(pending)
        unreserve(pending)

    monkeypatch.setattr(r.service, "_unreserve", spy)
    args = r.pod("a", 10_000)
    r.kube.next_binding("fail")
    assert r.bind(args) != ""
    [failed] = undone
    # kube-scheduler retries; the second attempt binds.
    r.kube.next_binding("ok")
    assert r.bind(args) == ""
    held = r.held(args.uid)
    assert held is not None

    unreserve(failed)
    unreserve(failed)

    assert r.held(args.uid) == held
    assert r.store.state(args.uid) == BOUND
    assert r.store.deleted == [args.uid]  # the first attempt's rows, once


def _bind_in_threads(r: Rig, binds: list[BindRequest]) -> dict[str, str]:
    errors: dict[str, str] = {}

    def run(args: BindRequest) -> None:
        errors[args.pod_name] = r.bind(args)

    threads = [threading.Thread(target=run, args=(args,)) for args in binds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


def _until(condition: Callable[[], bool]) -> None:
    event = threading.Event()
    for _ in range(2000):
        if condition():
            return
        event.wait(0.005)
    raise AssertionError("condition not reached")


def test_one_pod_refused_in_a_batch_leaves_the_others_bound() -> None:
    r = rig()
    gate = threading.Event()
    r.store.gate = gate
    first = r.pod("first", 1000)
    rest = [r.pod(name, 5000) for name in ("b", "c", "d")]
    r.store.refuse(
        "uid-c", store.AlreadyAllocated("uid-c", node=NODE, state=BOUND, operation="reserve")
    )
    holder = threading.Thread(target=lambda: r.bind(first))
    holder.start()
    _until(r.store.entered.is_set)  # the first commit is under way
    results: dict[str, str] = {}
    others = threading.Thread(target=lambda: results.update(_bind_in_threads(r, rest)))
    others.start()
    _until(lambda: r.service.waiting(NODE) == len(rest))
    gate.set()
    holder.join(30)
    others.join(30)

    assert r.store.commits == [["uid-first"], ["uid-b", "uid-c", "uid-d"]]  # one transaction
    assert results == {
        "b": "",
        "c": f"bind default/c: pod uid-c already has bound allocations on node {NODE}",
        "d": "",
    }
    assert [r.store.state(f"uid-{n}") for n in ("first", "b", "c", "d")] == [
        BOUND,
        BOUND,
        None,
        BOUND,
    ]
    assert r.held("uid-c") is None
    assert sorted(r.kube.posted()) == ["default/b", "default/d", "default/first"]


def test_a_connection_lost_before_the_commit_writes_nothing_and_frees_the_index() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.store.next_commit("lost-before")

    error = r.bind(args)

    assert error.startswith("bind default/a: store unavailable: reserve: connection lost"), error
    assert r.held(args.uid) is None and r.store.state(args.uid) is None
    assert r.kube.posted() == []


def test_a_commit_lost_unreadable_never_lets_the_store_over_commit() -> None:
    r = rig()
    args = r.pod("a", 10_000)
    r.store.next_commit("lost-unreadable")

    error = r.bind(args)

    assert "could not be read back" in error, error
    assert r.held(args.uid) is None  # the index gave it back...
    assert r.store.state(args.uid) == RESERVED  # ...the store may hold it (reconcile's)
    error = r.bind(r.pod("b", 10_000))
    assert f"node {NODE}" in error, error
    assert r.store.state("uid-b") is None
    assert r.store.overcommitted() == []


def test_standalone_commits_the_rows_bound_and_publishes_nothing() -> None:
    r = rig(standalone=True)
    args = r.pod("a", 10_000)

    assert r.service.claim(args) is NO_CLAIM  # the store's checks come first
    assert r.service.bind(args) == ""

    assert r.store.bound_at_commit == [True]
    assert r.store.state(args.uid) == BOUND
    assert r.held(args.uid) is not None
    assert r.pods.get(args.uid) is None
    # Nothing was published: no Binding, so no Event either (the rig records successes).
    assert r.events.recorded == []
    # Standalone binds are final: the same pod again is refused from the index.
    r.pods.put(make_request(1, mem=10_000, uid=args.uid))
    assert r.service.bind(args) == (
        f"bind default/a: pod {args.uid} already has bound allocations on node {NODE}"
    )
    unseen = r.pod("b", 1000, seen=False)
    assert r.service.bind(unseen) == (
        "bind default/b: pod UID uid-b was not seen at filter (or too long ago) and there is "
        "no Kubernetes API to read it from"
    )


def test_a_pod_without_managed_devices_is_bound_with_no_rows() -> None:
    r = rig()
    args = r.pod("plain", 0)
    r.pods.put(make_request(0, uid=args.uid))

    assert r.bind(args) == ""

    assert r.store.commits == []
    assert r.kube.bound_to("default", "plain") == NODE
    assert r.kube.annotations_of("default", "plain") == {}
