"""In-memory fakes of the binding cycle's ports (``services.bind_ports``).

``FakeBindStore`` keeps rows per pod and re-checks every reservation as the real
store does, with the store's own rule (``store.capacity.find_misfit`` over what is
committed and the round's pods before it): it never over-commits a device. Failures
are injected per commit: a pod refused, the connection lost before the commit (nothing
written), or lost during it (written, and read back or not).

``FakePublisher`` is a cluster of pods that a Binding updates; each Binding's outcome
is injected: ok, a definite failure, or an unknown outcome (the answer lost) with the
Binding applied or not, and the pod readable or not.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from vgpu_extender import store
from vgpu_extender.domain import NodeInventory, PodAssignment, PodRequest
from vgpu_extender.kube import AlreadyBound, KubeError, KubeObject, OutcomeUnknown
from vgpu_extender.services.bind_ports import BindError, BindRequest
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.store.capacity import committed_usage, find_misfit
from vgpu_extender.store.errors import StoreUnavailable

RESERVED = store.AllocationState.RESERVED.value
BOUND = store.AllocationState.BOUND.value


@dataclass(slots=True)
class Row:
    """One pod's rows, as one record."""

    assignment: PodAssignment
    state: str
    namespace: str
    name: str


#: What becomes of the next commit: written; nothing written (the connection lost before
#: the commit, both tries); or written with the answer lost and the rows not readable
#: (``"lost-unreadable"``). A lost answer whose rows are read back is the store port's
#: own business (``SqlBindStore``, tested against real databases): to the service it
#: is a commit that stood, as ``"ok"``.
CommitFate = Literal["ok", "lost-before", "lost-unreadable"]


class FakeBindStore:
    """``BindStore`` in memory; ``cluster`` is the index ``learn_node`` refreshes."""

    def __init__(self, cluster: ClusterState, nodes: Iterable[NodeInventory] = ()) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self.nodes: dict[str, NodeInventory] = {node.name: node for node in nodes}
        self.rows: dict[str, Row] = {}
        self._fates: deque[CommitFate] = deque()
        self._refusals: dict[str, store.StoreError] = {}
        self.fail_deletes: store.StoreError | None = None
        #: Per commit call, the pod UIDs offered, in order, and whether written bound.
        self.commits: list[list[str]] = []
        self.bound_at_commit: list[bool] = []
        #: When set, a commit waits for it (after setting ``entered``): the binds that
        #: arrive meanwhile queue for the next turn.
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.deleted: list[str] = []
        self.learnt: list[str] = []
        self.marked: list[str] = []

    # ----------------------------------------------------------------- injecting
    def next_commit(self, *fates: CommitFate) -> None:
        """The fates of the next commits, in order (then ``"ok"``)."""
        self._fates.extend(fates)

    def refuse(self, pod_uid: str, refusal: store.StoreError) -> None:
        """Refuse the pod's next reservation with ``refusal``."""
        self._refusals[pod_uid] = refusal

    def write_behind_the_index(self, pod_uid: str, assignment: PodAssignment) -> None:
        """Rows another replica committed, which this process's index does not know."""
        self.rows[pod_uid] = Row(assignment, BOUND, "default", pod_uid)

    # ----------------------------------------------------------------- the port
    def commit(
        self, reservations: Sequence[store.Reservation], *, bound: bool
    ) -> list[store.StoreError | None]:
        if self.gate is not None:
            self.entered.set()
            self.gate.wait(30)
        with self._lock:
            self.commits.append([r.pod_uid for r in reservations])
            self.bound_at_commit.append(bound)
            fate = self._fates.popleft() if self._fates else "ok"
            if fate == "lost-before":
                raise StoreUnavailable(
                    "connection lost before commit (server closed the connection)",
                    operation="reserve",
                )
            accepted: list[store.Reservation] = []
            refusals: list[store.StoreError | None] = []
            for reservation in reservations:
                refusal = self._check(reservation, accepted)
                refusals.append(refusal)
                if refusal is None:
                    accepted.append(reservation)
            for reservation in accepted:
                self.rows[reservation.pod_uid] = Row(
                    reservation.assignment,
                    BOUND if bound else RESERVED,
                    reservation.namespace,
                    reservation.name,
                )
            if fate == "lost-unreadable":
                raise StoreUnavailable(
                    "connection lost during commit and the rows could not be read back: "
                    "server closed the connection",
                    operation="reserve",
                )
            return refusals

    def delete_reservation(self, pod_uid: str) -> None:
        with self._lock:
            if self.fail_deletes is not None:
                raise self.fail_deletes
            self.deleted.append(pod_uid)
            row = self.rows.get(pod_uid)
            if row is not None and row.state == RESERVED:
                del self.rows[pod_uid]

    def learn_node(self, node: str) -> None:
        with self._lock:
            self.learnt.append(node)
            held = {uid: row.assignment for uid, row in self.rows.items()}
        cluster = self._cluster
        with cluster.lock:
            for allocation in cluster.index.pods_on(node):
                cluster.index.release(allocation.pod_uid)
            for uid, assignment in held.items():
                if assignment.node == node:
                    cluster.apply(uid, assignment)

    def mark_bound(self, pod_uid: str) -> None:
        with self._lock:
            self.marked.append(pod_uid)
            row = self.rows.get(pod_uid)
            if row is not None:
                row.state = BOUND

    # ----------------------------------------------------------------- reading
    def state(self, pod_uid: str) -> str | None:
        row = self.rows.get(pod_uid)
        return None if row is None else row.state

    def overcommitted(self) -> list[str]:
        """Devices holding more than they have, in any dimension (none, ever)."""
        found = []
        for node in self.nodes.values():
            used = committed_usage(
                r.assignment for r in self.rows.values() if r.assignment.node == node.name
            )
            for device in node.devices:
                usage = used.get(device.uuid)
                if usage is not None and (
                    usage.memory_mib > device.memory_mib
                    or usage.cores > device.cores
                    or usage.slots > device.count
                ):
                    found.append(device.uuid)
        return found

    def _check(
        self, reservation: store.Reservation, accepted: Sequence[store.Reservation]
    ) -> store.StoreError | None:
        """As the store checks a pod: against what is committed and the round's pods
        accepted before it."""
        uid, assignment = reservation.pod_uid, reservation.assignment
        injected = self._refusals.pop(uid, None)
        if injected is not None:
            return injected
        row = self.rows.get(uid)
        if row is not None or any(r.pod_uid == uid for r in accepted):
            return store.AlreadyAllocated(
                uid, node=assignment.node, state=row.state if row else RESERVED, operation="reserve"
            )
        node = self.nodes.get(assignment.node)
        if node is None:
            return store.StoreConflict(
                f"node {assignment.node} is not in the store",
                node=assignment.node,
                operation="reserve",
            )
        held = [r.assignment for r in self.rows.values() if r.assignment.node == node.name]
        held += [r.assignment for r in accepted]
        misfit = find_misfit(
            node=node.name,
            devices={device.uuid: device for device in node.devices},
            cordoned=node.cordoned,
            committed=committed_usage(held),
            assignment=assignment,
            shares=self._cluster.index.shares,
        )
        if misfit is None:
            return None
        return store.StoreConflict(
            misfit.message,
            reason=misfit.reason,
            node=node.name,
            device=misfit.device,
            operation="reserve",
        )


#: What becomes of the next Binding: applied; refused (a definite failure); the pod
#: found bound here already, by someone else; the answer lost with the Binding applied
#: (``"unknown-bound"``), applied without our annotations (``"unknown-foreign"``: another
#: binder's, that landed first), or not applied (``"unknown-unbound"``).
Outcome = Literal[
    "ok", "fail", "already-here", "unknown-bound", "unknown-foreign", "unknown-unbound"
]


@dataclass(slots=True)
class _Pod:
    uid: str
    node: str = ""
    annotations: dict[str, str] = field(default_factory=dict)


class FakePublisher:
    """``BindPublisher`` over a cluster of pods in memory. A bind without a cached
    request is refused (the fake reads no pod specs)."""

    claims_on_arrival = True
    bound_at_commit = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pods: dict[str, _Pod] = {}
        self._outcomes: deque[Outcome] = deque()
        #: Reads of the pod fail (the API server away).
        self.unreadable = False
        #: Every call, as (method, pod key).
        self.calls: list[tuple[str, str]] = []

    def add_pod(self, namespace: str, name: str, uid: str) -> None:
        self.pods[f"{namespace}/{name}"] = _Pod(uid)

    def next_binding(self, *outcomes: Outcome) -> None:
        """The outcomes of the next Bindings, in order (then ``"ok"``)."""
        self._outcomes.extend(outcomes)

    def bound_to(self, namespace: str, name: str) -> str:
        return self.pods[f"{namespace}/{name}"].node

    def annotations_of(self, namespace: str, name: str) -> dict[str, str]:
        return dict(self.pods[f"{namespace}/{name}"].annotations)

    def posted(self) -> list[str]:
        return [key for method, key in self.calls if method == "post_binding"]

    # ----------------------------------------------------------------- the port
    def pod_request(self, args: BindRequest, cached: PodRequest | None) -> PodRequest:
        self._call("pod_request", args)
        if cached is None:
            raise BindError(f"bind {args.key}: pod not found")
        return cached

    def prepare(self, args: BindRequest) -> None:
        self._call("prepare", args)

    def post_binding(self, args: BindRequest, annotations: Mapping[str, str] | None) -> None:
        self._call("post_binding", args)
        with self._lock:
            outcome = self._outcomes.popleft() if self._outcomes else "ok"
            pod = self.pods.get(args.key)
            if pod is None or pod.uid != args.uid:
                raise KubeError(f'pods "{args.pod_name}" not found', status=404)
            if outcome == "fail":
                raise KubeError("Internal error occurred: etcd is away", status=500)
            if outcome == "already-here":
                pod.node = args.node  # someone else bound it here first, without our annotations
                raise AlreadyBound(f"pod {args.pod_name} is already assigned", node=args.node)
            if pod.node:
                raise AlreadyBound(f"pod {args.pod_name} is already assigned", node=pod.node)
            if outcome != "unknown-unbound":
                pod.node = args.node
            if outcome not in ("unknown-unbound", "unknown-foreign"):
                pod.annotations.update(annotations or {})
            if outcome.startswith("unknown"):
                raise OutcomeUnknown(
                    "the server's answer was lost: request did not complete", status=504
                )

    def read_pod(self, args: BindRequest) -> KubeObject | None:
        self._call("read_pod", args)
        with self._lock:
            if self.unreadable:
                raise KubeError("the API server is away", status=503)
            pod = self.pods.get(args.key)
            if pod is None:
                return None
            spec = {"nodeName": pod.node} if pod.node else {}
            return {
                "metadata": {
                    "name": args.pod_name,
                    "namespace": args.namespace,
                    "uid": pod.uid,
                    "annotations": copy.deepcopy(pod.annotations),
                },
                "spec": spec,
            }

    def annotate(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        self._call("annotate", args)
        with self._lock:
            self.pods[args.key].annotations.update(annotations)

    def _call(self, method: str, args: BindRequest) -> None:
        with self._lock:
            self.calls.append((method, args.key))
