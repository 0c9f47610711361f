"""bind: the only write. Choose devices, reserve them in the store, tell Kubernetes.

1. Find the pod's request (the pod seen at filter, or the pod read from the API).
2. Choose devices on the node kube-scheduler picked and mark them taken in the index
   at once, so the next pods' filters see them. For a pod filter has seen this is the
   ``claim``, made the moment the bind arrives and before any I/O (kube-scheduler
   sends the next pod's filter without waiting for this bind). Then, binds to one
   node taking turns (``batching``: the binds queued for a node go in one turn), in
   one store transaction: lock the node's row, re-check each pod's fit against what
   is committed and the pods before it, insert the rows. When another replica got
   there first the index learns the node from the store and the choice is made again.
3. Under HAMi's node lock when configured, create the Binding with the pod UID and
   HAMi's annotations (the API server sets them on the pod in the same update as its
   node). Then queue the pod to have its rows marked bound (and, when configured, a
   ``BindingSucceed`` Event posted) by workers in the background: the bind does not
   wait for either. A failed bind always queues a ``BindingFailed`` Event.
4. Any failure after the insert deletes the rows and releases the lock. A Binding
   whose answer was lost (``OutcomeUnknown``: no answer once sent, the server's
   timeout) is no failure yet: the pod is read back first (``_settle``). Bound to
   this node with our annotations, the bind stands; bound elsewhere, gone, or still
   unbound after ``check_window_s``, it is undone; when the pod cannot be read, the
   rows stay reserved (the devices taken) and the periodic reconcile settles them.

Without Kubernetes (standalone) the allocation is recorded as bound at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from vgpu_extender import store
from vgpu_extender.domain import PodAssignment, PodRequest, RequestError
from vgpu_extender.kube import (
    AlreadyBound,
    EventType,
    KubeClient,
    KubeError,
    KubeObject,
    NodeLock,
    OutcomeUnknown,
)
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services.batching import Batches
from vgpu_extender.services.bound_marker import BoundMarker
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.event_recorder import EventRecorder
from vgpu_extender.services.pod_cache import PodCache

logger = logging.getLogger(__name__)

#: How long a bind whose Binding's answer was lost keeps reading the pod back while it
#: shows unbound (the Binding may still be in flight on the server).
DEFAULT_CHECK_WINDOW_S = 5.0
#: First pause between two reads of the pod in that window; it doubles up to the
#: longest, so an API server too busy to answer the Binding is not read 25 times.
CHECK_INTERVAL_S = 0.2
CHECK_INTERVAL_MAX_S = 1.0


@dataclass(frozen=True, slots=True)
class BindRequest:
    """kube-scheduler's ExtenderBindingArgs."""

    pod_name: str
    namespace: str
    uid: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    def problem(self) -> str:
        """What is wrong with the arguments, naming the field; empty when fine."""
        for field_name, value in (
            ("PodName", self.pod_name),
            ("PodNamespace", self.namespace),
            ("PodUID", self.uid),
            ("Node", self.node),
        ):
            if not isinstance(value, str) or not value.strip():
                return f"bind: field {field_name} must be a non-empty string, got {value!r}"
        return ""


class BindError(Exception):
    """A bind that cannot go ahead; the message is what kube-scheduler sees."""


class _Unsettled(Exception):  # noqa: N818
    """The Binding may have been applied and the pod cannot be read to tell."""


@dataclass(frozen=True, slots=True)
class Claim:
    """What a bind settled in memory on arrival: a refusal, or devices chosen (and
    marked taken in the index when ``assumed``) for ``request``."""

    refusal: str = ""
    request: PodRequest | None = None
    assignment: PodAssignment | None = None
    assumed: bool = False

    @property
    def final(self) -> bool:
        """Nothing is left to do but answer (no I/O)."""
        return bool(self.refusal)


NO_CLAIM = Claim()


@dataclass(slots=True)
class _Pending:
    """A bind waiting for its turn at the store, and then what came of it."""

    args: BindRequest
    request: PodRequest
    #: Devices chosen on arrival; used once (a retry chooses afresh).
    claim: Claim
    #: Whether this bind marked the devices it offers the store taken in the index
    #: (so it must take them back if the store refuses them).
    assumed: bool = False
    assignment: PodAssignment | None = None
    #: Why it was not written.
    error: str = ""
    #: The store's last refusal, when it is to be chosen again.
    refused: str = ""

    @property
    def settled(self) -> bool:
        return self.assignment is not None or bool(self.error)

    def fail(self, message: str) -> None:
        self.error = message


class BindingService:
    def __init__(
        self,
        *,
        cluster: ClusterState,
        engine: Engine,
        sessions: sessionmaker[Session],
        pod_cache: PodCache,
        kube: KubeClient | None = None,
        events: EventRecorder | None = None,
        success_events: bool = False,
        marker: BoundMarker | None = None,
        node_lock: NodeLock | None = None,
        persist_node: Callable[[str], None] = lambda _node: None,
        retries: int = 3,
        check_window_s: float = DEFAULT_CHECK_WINDOW_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._cluster = cluster
        # The bind's own transactions run on bare connections: the store writes rows
        # with Core statements, so a session's bookkeeping would be pure overhead.
        self._engine = engine
        self._sessions = sessions
        self._pods = pod_cache
        self._kube = kube
        self._events = events
        self._success_events = success_events
        self._marker = marker
        self._node_lock = node_lock
        #: Writes the node's row if a request registered it moments ago and the store
        #: has yet to get it (standalone): the bind's rows refer to it.
        self._persist_node = persist_node
        self._retries = retries
        self._check_window_s = check_window_s
        self._clock = clock
        self._writes: Batches[_Pending] = Batches(self._reserve_batch)
        self._on_batch: Callable[[int], None] = lambda _binds: None

    def count_batches(self, on_batch: Callable[[int], None]) -> None:
        """Call ``on_batch`` with the number of binds in each store transaction from now
        on (the metrics)."""
        self._on_batch = on_batch

    def claim(self, args: BindRequest) -> Claim:
        """Choose the devices now, in memory only, for a pod filter has seen; anything
        that needs I/O first (reading the pod, standalone checks) is left to ``bind``.

        Cheap enough for the event loop: once this returns, the next filters see the
        devices taken, even while the bind waits for its turn at the store.
        """
        if self._kube is None or args.problem():
            return NO_CLAIM
        request = self._pods.get(args.uid)
        if request is None or not request.managed:
            return NO_CLAIM
        try:
            with self._cluster.lock:
                chosen = self._choose(args, request)
                assumed = self._cluster.assume(args.uid, chosen)
        except BindError as exc:
            return Claim(refusal=str(exc))
        return Claim(request=request, assignment=chosen, assumed=assumed)

    def bind(self, args: BindRequest, claim: Claim = NO_CLAIM) -> str:
        """Bind the pod (continuing from ``claim``); returns the error text, empty on
        success."""
        if claim.refusal:
            return claim.refusal
        problem = args.problem()
        if problem:
            return problem
        try:
            request = claim.request or self._request(args)
            if not request.managed:
                self._bind_in_kube(args)
                return ""
            if self._kube is None:
                self._persist(args)
            assignment = self._reserve(args, request, claim)
        except BindError as exc:
            return str(exc)
        if self._kube is None:
            self._pods.pop(args.uid)
            return ""
        error = self._publish(args, assignment)
        if not error:
            self._pods.pop(args.uid)
        return error

    def waiting(self, node: str) -> int:
        """Binds to ``node`` waiting for their turn at the store."""
        return self._writes.waiting(node)

    # ----------------------------------------------------------------- step 1
    def _request(self, args: BindRequest) -> PodRequest:
        cached = self._pods.get(args.uid)
        if self._kube is None:
            with self._cluster.lock:
                held = self._cluster.index.allocation(args.uid)
            if held is not None:  # standalone binds are final: the pod is bound
                raise BindError(
                    f"bind {args.key}: pod {args.uid} already has bound allocations on node "
                    f"{held.assignment.node}"
                )
            if cached is None:
                raise BindError(
                    f"bind {args.key}: pod UID {args.uid} was not seen at filter (or too long "
                    "ago) and there is no Kubernetes API to read it from"
                )
            return cached
        if cached is not None:
            # Seen at filter moments ago, by UID. A pod bound meanwhile (a retried bind
            # after a timeout) is caught by the store, which refuses a second allocation
            # for the UID, and by the API server's 409 on the Binding: no read needed.
            return cached
        try:
            pod = self._kube.get_pod(args.namespace, args.pod_name)
        except KubeError as exc:
            raise BindError(f"bind {args.key}: cannot read the pod: {exc}") from None
        if pod is None:
            raise BindError(f"bind {args.key}: pod not found")
        if kobj.uid(pod) != args.uid:
            raise BindError(
                f"bind {args.key}: pod has UID {kobj.uid(pod)}, not {args.uid} "
                "(deleted and created again)"
            )
        bound_to = kobj.node_name(pod)
        if bound_to:
            raise BindError(f"bind {args.key}: pod is already bound to node {bound_to}")
        try:
            return self._cluster.vendor.parse_pod(pod)
        except RequestError as exc:
            raise BindError(f"bind {args.key}: {exc}") from None

    def _persist(self, args: BindRequest) -> None:
        try:
            self._persist_node(args.node)
        except store.StoreError as exc:
            raise BindError(
                f"bind {args.key}: node {args.node} not yet in the store: {exc}"
            ) from None

    # ----------------------------------------------------------------- step 2
    def _choose(self, args: BindRequest, request: PodRequest) -> PodAssignment:
        """The devices on the bind's node (under the cluster lock)."""
        chosen = self._cluster.planner.place(request, args.node)
        if not isinstance(chosen, PodAssignment):
            raise BindError(
                f"bind {args.key}: node {args.node} cannot take the pod: {chosen.message()}"
            )
        return chosen

    def _reserve(self, args: BindRequest, request: PodRequest, claim: Claim) -> PodAssignment:
        pending = _Pending(args, request, claim)
        self._writes.submit(args.node, pending)
        if pending.assignment is None:
            raise BindError(pending.error or f"bind {args.key}: not written")
        return pending.assignment

    def _reserve_batch(self, node: str, batch: list[_Pending]) -> None:
        """Write the rows of binds to ``node`` in one transaction (their turn at the
        node); those the store refuses because the node changed meanwhile are chosen
        again, after learning the node from the store, up to ``retries`` rounds."""
        remaining = batch
        try:
            for _attempt in range(self._retries):
                remaining = self._reserve_round(node, remaining)
                if not remaining:
                    return
        except BaseException as exc:
            for pending in batch:  # the others in the batch learn it too
                if not pending.settled:
                    self._take_back(pending)
                    pending.fail(f"bind {pending.args.key}: {type(exc).__name__}: {exc}")
            raise
        for pending in remaining:
            pending.fail(f"bind {pending.args.key}: node {node} no longer fits: {pending.refused}")

    def _reserve_round(self, node: str, batch: list[_Pending]) -> list[_Pending]:
        """One transaction for ``batch``; returns the binds to choose for again."""
        chosen = self._choose_all(batch)
        if not chosen:
            return []
        self._on_batch(len(chosen))
        try:
            refusals = self._write_round(chosen)
        except store.StoreError as exc:
            for pending, _ in chosen:
                self._take_back(pending)
                pending.fail(f"bind {pending.args.key}: {exc}")
            return []
        again: list[_Pending] = []
        changed = False
        for (pending, assignment), refusal in zip(chosen, refusals, strict=True):
            if refusal is None:
                # Recorded again even when assumed: a node refresh meanwhile may have
                # dropped it.
                self._cluster.apply(pending.args.uid, assignment)
                pending.assumed = False  # the store has it now
                with self._cluster.lock:
                    self._cluster.planner.observe(pending.request)
                pending.assignment = assignment
                continue
            self._take_back(pending)
            if isinstance(refusal, store.AlreadyAllocated):
                try:
                    dropped = self._drop_stale_reservation(pending.args, refusal)
                except store.StoreError as exc:
                    pending.fail(f"bind {pending.args.key}: {exc}")
                    continue
                if not dropped:
                    pending.fail(f"bind {pending.args.key}: {refusal.detail}")
                    continue
            elif isinstance(refusal, store.StoreConflict):
                # Another replica (or an import) changed the node: learn it, choose again.
                changed = True
            else:
                pending.fail(f"bind {pending.args.key}: {refusal}")
                continue
            pending.refused = refusal.detail
            again.append(pending)
        if changed:
            self._cluster.refresh_node(self._sessions, node)
        return again

    def _write_round(
        self, chosen: list[tuple[_Pending, PodAssignment]]
    ) -> list[store.StoreError | None]:
        """Insert the round's rows in one transaction; each bind's refusal, or None.

        Run again on a new connection when the connection is lost (a database failover)
        before the commit; when it is lost during the commit, the rows are read back
        rather than written twice."""

        def write(connection: Connection) -> list[store.StoreError | None]:
            refusals = store.reserve_all(
                connection,
                [
                    store.Reservation(p.args.uid, p.args.namespace, p.args.pod_name, a)
                    for p, a in chosen
                ],
                now=self._clock(),
                share=self._cluster.index.share,
            )
            if self._kube is None:
                written = [
                    p.args.uid for (p, _), r in zip(chosen, refusals, strict=True) if r is None
                ]
                store.mark_many_bound(connection, pod_uids=written, now=self._clock())
            return refusals

        def committed(refusals: list[store.StoreError | None]) -> bool:
            written = [p.args.uid for (p, _), r in zip(chosen, refusals, strict=True) if r is None]
            with self._sessions() as session:
                return all(store.live_allocations(session, pod_uid=uid) for uid in written)

        return store.run_transaction(self._engine, write, committed=committed, operation="reserve")

    def _choose_all(self, batch: list[_Pending]) -> list[tuple[_Pending, PodAssignment]]:
        """Each bind's devices: those claimed on arrival, or (on a retry, or without a
        claim) chosen now and marked taken, so the next pods' filters see them."""
        chosen: list[tuple[_Pending, PodAssignment]] = []
        for pending in batch:
            claim, pending.claim = pending.claim, NO_CLAIM  # a retry chooses afresh
            if claim.assignment is not None:
                assignment, pending.assumed = claim.assignment, claim.assumed
            else:
                try:
                    with self._cluster.lock:
                        assignment = self._choose(pending.args, pending.request)
                        pending.assumed = self._cluster.assume(pending.args.uid, assignment)
                except BindError as exc:
                    pending.fail(str(exc))
                    continue
            chosen.append((pending, assignment))
        return chosen

    def _take_back(self, pending: _Pending) -> None:
        """Release the devices this bind marked taken (on arrival or in a round), if any."""
        if pending.assumed or pending.claim.assumed:
            self._cluster.release(pending.args.uid)
        pending.assumed, pending.claim = False, NO_CLAIM

    def _drop_stale_reservation(self, args: BindRequest, exc: store.AlreadyAllocated) -> bool:
        """A reservation left by an earlier attempt of this pod, which the API shows
        unbound (checked in step 1), is undone so the retry can proceed."""
        if self._kube is None or exc.state != store.AllocationState.RESERVED.value:
            return False
        with self._engine.begin() as connection:
            store.delete_reservation(connection, pod_uid=args.uid)
        self._cluster.release(args.uid)
        logger.info("bind %s: dropped the reservation of an earlier attempt", args.key)
        return True

    # ----------------------------------------------------------------- steps 3-5
    def _publish(self, args: BindRequest, assignment: PodAssignment) -> str:
        assert self._kube is not None
        locked = False
        try:
            if self._node_lock is not None:
                self._node_lock.acquire(args.node, args.namespace, args.pod_name)
                locked = True
            annotations = self._cluster.vendor.bind_annotations(
                assignment, bind_time=int(self._clock().timestamp())
            )
            try:
                self._create_binding(args, annotations)
            except OutcomeUnknown as exc:
                self._settle(args, annotations, exc)
        except _Unsettled as exc:
            # Maybe bound: the devices stay taken, the rows reserved, until the
            # reconcile finds the pod bound (marks them) or not (releases them).
            self._release_lock(args, locked)
            message = f"bind {args.key} to {args.node}: {exc}"
            logger.warning("%s", message)
            self._record(args, "BindingFailed", message, "Warning")
            return message
        except Exception as exc:  # any failure after the insert must undo it
            self._undo(args, locked)
            message = f"bind {args.key} to {args.node}: {exc}"
            self._record(args, "BindingFailed", message, "Warning")
            return message
        if self._marker is not None:
            self._marker.mark(args.uid)
        if self._success_events:
            devices = ",".join(assignment.device_uuids)
            self._record(args, "BindingSucceed", f"bound to {args.node} with devices {devices}")
        return ""

    def _create_binding(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        assert self._kube is not None
        try:
            # The annotations ride on the Binding: the pod gets them with its node.
            self._kube.bind_pod(
                args.namespace, args.pod_name, args.uid, args.node, annotations=annotations
            )
        except AlreadyBound as exc:
            if exc.node != args.node:
                raise
            # Bound to this very node by someone else meanwhile, with annotations
            # that may not be ours: write ours, so the pod runs with the devices
            # recorded, and the allocation stands.
            self._adopt(args, annotations)

    def _adopt(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        assert self._kube is not None
        self._kube.patch_pod_annotations(args.namespace, args.pod_name, annotations)
        logger.info("bind %s: already bound to %s; keeping it", args.key, args.node)

    def _settle(
        self, args: BindRequest, annotations: Mapping[str, str], lost: OutcomeUnknown
    ) -> None:
        """Learn from the pod what became of a Binding whose answer was lost.

        Returns when the pod is bound to this node with our annotations (the bind
        stands); raises the failure to undo when it is gone, bound elsewhere, or still
        unbound once ``check_window_s`` has passed (a Binding still in flight may
        land in that time); ``_Unsettled`` when the pod cannot be read at all.
        """
        assert self._kube is not None
        deadline = time.monotonic() + self._check_window_s
        pause = CHECK_INTERVAL_S
        while True:
            try:
                pod = self._kube.get_pod(args.namespace, args.pod_name)
                unreadable: KubeError | None = None
            except KubeError as exc:
                pod, unreadable = None, exc
            if unreadable is None:
                if pod is None or kobj.uid(pod) != args.uid:
                    raise KubeError(f"{lost}; the pod is gone") from None
                bound_to = kobj.node_name(pod)
                if bound_to == args.node:
                    if not self._ours(pod, annotations):
                        self._adopt(args, annotations)
                    logger.info(
                        "bind %s: the Binding's answer was lost (%s); the pod is bound to %s",
                        args.key,
                        lost,
                        args.node,
                    )
                    return
                if bound_to:
                    raise KubeError(f"{lost}; the pod is bound to node {bound_to}") from None
            if time.monotonic() >= deadline:
                break
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, CHECK_INTERVAL_MAX_S)
        if unreadable is not None:
            raise _Unsettled(
                f"outcome unknown: {lost}; the pod cannot be read back ({unreadable}): its "
                "devices stay reserved until the reconcile finds it bound or not"
            )
        raise KubeError(f"{lost}; the pod is not bound") from None

    def _ours(self, pod: KubeObject, annotations: Mapping[str, str]) -> bool:
        """Whether the pod carries the devices this bind chose (the device plugin
        changes the other annotations as it goes)."""
        held = kobj.annotations(pod)
        vendor = self._cluster.vendor
        keys = (vendor.node_annotation, vendor.assignment_annotation)
        return all(held.get(key) == annotations.get(key) for key in keys)

    def _record(
        self, args: BindRequest, reason: str, message: str, type: EventType = "Normal"
    ) -> None:
        if self._events is not None:
            self._events.record(
                namespace=args.namespace,
                pod=args.pod_name,
                uid=args.uid,
                reason=reason,
                message=message,
                type=type,
            )

    def _bind_in_kube(self, args: BindRequest) -> None:
        """A pod that asks for no managed device: bind it, nothing to record."""
        if self._kube is None:
            return
        try:
            self._kube.bind_pod(args.namespace, args.pod_name, args.uid, args.node)
        except KubeError as exc:
            raise BindError(f"bind {args.key} to {args.node}: {exc}") from None

    def _undo(self, args: BindRequest, locked: bool) -> None:
        try:
            with self._engine.begin() as connection:
                store.delete_reservation(connection, pod_uid=args.uid)
        except store.StoreError as exc:
            # The rows stay reserved; reconcile releases them once the TTL has passed.
            logger.error("bind %s: reservation not undone: %s", args.key, exc)
        finally:
            self._cluster.release(args.uid)
            self._release_lock(args, locked)

    def _release_lock(self, args: BindRequest, locked: bool) -> None:
        if locked and self._node_lock is not None:
            try:
                self._node_lock.release(args.node, args.namespace, args.pod_name)
            except KubeError as exc:
                logger.warning("bind %s: node lock not released: %s", args.key, exc)
