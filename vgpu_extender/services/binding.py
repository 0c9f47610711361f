"""bind: the only write, as kube-scheduler's binding cycle in named steps.

0. Find the pod's request (the pod seen at filter, or the pod read from the API):
   the publisher's ``pod_request``.
1. **Reserve** (``_reserve``): choose devices on the node kube-scheduler picked and
   mark them taken in the index at once (kube-scheduler's "assume"), so the next pods'
   filters see them. For a pod filter has seen this is the ``claim``, made the moment
   the bind arrives and before any I/O (kube-scheduler sends the next pod's filter
   without waiting for this bind).
2. **Commit** (``_commit``): binds to one node take turns (``batching``: the binds
   queued for a node go in one turn), in one store transaction (``BindStore.commit``):
   lock the node's row, re-check each pod's fit against what is committed and the pods
   before it, insert the rows. When another replica got there first the index learns
   the node from the store and the choice is made again.
3. **Publish** (``_publish``): under HAMi's node locks when configured (each vendor's
   the pod asks for, in HAMi's order: ``bind_locks``), create the
   Binding with the pod UID and HAMi's annotations (the API server sets them on the
   pod in the same update as its node). Then queue the pod to have its rows marked
   bound (and, when configured, a ``BindingSucceed`` Event posted) by workers in the
   background: the bind does not wait for either. A failed bind always queues a
   ``BindingFailed`` Event.
4. **Unreserve** (``_unreserve``), on any failure: the rows are deleted, the devices
   released in the index, each once however often it is called; the locks the bind
   took are released.
   A Binding whose answer was lost (``OutcomeUnknown``: no answer once sent, the
   server's timeout) is no failure yet: the pod is read back first (``_settle``).
   Bound to this node with our annotations, the bind stands; bound elsewhere, gone,
   or still unbound after ``check_window_s``, it is undone; when the pod cannot be
   read, the rows stay reserved (the devices taken) and the periodic reconcile
   settles them.

Without Kubernetes (standalone) the publisher publishes nothing, and the rows are
written bound in the commit's transaction (``BindPublisher.bound_at_commit``).
The store and the cluster are reached only through the ports of ``bind_ports``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from vgpu_extender import store
from vgpu_extender.domain import PodAssignment, PodRequest
from vgpu_extender.kube import (
    AlreadyBound,
    EventType,
    KubeError,
    KubeObject,
    NodeLock,
    OutcomeUnknown,
)
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services.batching import Batches
from vgpu_extender.services.bind_locks import NO_LOCKS, BindLocks, HeldLocks
from vgpu_extender.services.bind_ports import (
    BindError,
    BindEvents,
    BindPublisher,
    BindRequest,
    BindStore,
)
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.hooks import BindObserver
from vgpu_extender.services.pod_cache import PodCache

__all__ = [
    "CHECK_INTERVAL_MAX_S",
    "CHECK_INTERVAL_S",
    "DEFAULT_CHECK_WINDOW_S",
    "NO_CLAIM",
    "BindError",
    "BindRequest",
    "BindingService",
    "Claim",
]

logger = logging.getLogger(__name__)

#: How long a bind whose Binding's answer was lost keeps reading the pod back while it
#: shows unbound (the Binding may still be in flight on the server).
DEFAULT_CHECK_WINDOW_S = 5.0
#: First pause between two reads of the pod in that window; it doubles up to the
#: longest, so an API server too busy to answer the Binding is not read 25 times.
CHECK_INTERVAL_S = 0.2
CHECK_INTERVAL_MAX_S = 1.0


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
    """One bind through the cycle: waiting for its turn at the store, then what came
    of it, and what of its reservation is in place (for ``_unreserve``)."""

    args: BindRequest
    request: PodRequest
    #: Devices chosen on arrival; used once (a retry chooses afresh).
    claim: Claim
    #: Whether this bind marked the devices it offers the store taken in the index
    #: (so it must take them back if the store refuses them).
    assumed: bool = False
    #: Whether the store holds its rows (and the index the assignment): undone by
    #: deleting both.
    committed: bool = False
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
        pod_cache: PodCache,
        store: BindStore,
        publisher: BindPublisher,
        events: BindEvents | None = None,
        success_events: bool = False,
        node_lock: NodeLock | None = None,
        retries: int = 3,
        check_window_s: float = DEFAULT_CHECK_WINDOW_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_bound: BindObserver | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._cluster = cluster
        #: Told of every bind answer, and of each store transaction's number of binds.
        self._on_bound = on_bound
        self._on_batch: Callable[[int], None] = on_batch or (lambda _binds: None)
        self._pods = pod_cache
        self._store = store
        self._publisher = publisher
        self._events = events
        self._success_events = success_events
        #: The node locks of each bind's vendors, all through HAMi's shared one.
        self._locks = BindLocks(node_lock, self._cluster.vendors) if node_lock is not None else None
        self._retries = retries
        self._check_window_s = check_window_s
        self._clock = clock
        self._writes: Batches[_Pending] = Batches(self._commit_batch)

    def claim(self, args: BindRequest) -> Claim:
        """Choose the devices now, in memory only, for a pod filter has seen; anything
        that needs I/O first (reading the pod, standalone checks) is left to ``bind``.

        Cheap enough for the event loop: once this returns, the next filters see the
        devices taken, even while the bind waits for its turn at the store.
        """
        if not self._publisher.claims_on_arrival or args.problem():
            return NO_CLAIM
        request = self._pods.get(args.uid)
        if request is None or not request.managed:
            return NO_CLAIM
        try:
            chosen, assumed = self._reserve(args, request)
        except BindError as exc:
            return Claim(refusal=str(exc))
        return Claim(request=request, assignment=chosen, assumed=assumed)

    def bind(self, args: BindRequest, claim: Claim = NO_CLAIM) -> str:
        """Bind the pod (continuing from ``claim``); returns the error text, empty on
        success."""
        error = self._bind(args, claim)
        if self._on_bound is not None:
            self._on_bound.bound(args, error)
        return error

    def _bind(self, args: BindRequest, claim: Claim) -> str:
        if claim.refusal:
            return claim.refusal
        problem = args.problem()
        if problem:
            return problem
        try:
            request = claim.request or self._publisher.pod_request(args, self._pods.get(args.uid))
            if not request.managed:
                self._bind_unmanaged(args)
                return ""
            self._publisher.prepare(args)
            pending = self._commit(args, request, claim)
        except BindError as exc:
            return str(exc)
        if self._publisher.bound_at_commit:
            # Standalone: the rows were written bound, and there is nothing to publish
            # (an unreserve now would free the index's devices but not the bound rows).
            self._pods.pop(args.uid)
            return ""
        error = self._publish(pending)
        if not error:
            self._pods.pop(args.uid)
        return error

    def waiting(self, node: str) -> int:
        """Binds to ``node`` waiting for their turn at the store."""
        return self._writes.waiting(node)

    # ----------------------------------------------------------------- reserve
    def _reserve(self, args: BindRequest, request: PodRequest) -> tuple[PodAssignment, bool]:
        """Choose the devices on the bind's node and mark them taken in the index, under
        the cluster lock; returns them, and whether this call marked them (False: the
        index held the pod already)."""
        with self._cluster.lock:
            chosen = self._cluster.planner.place(request, args.node)
            if not isinstance(chosen, PodAssignment):
                raise BindError(
                    f"bind {args.key}: node {args.node} cannot take the pod: "
                    f"{chosen.message(self._cluster.vendors.wording_for(request))}"
                )
            return chosen, self._cluster.assume(args.uid, chosen)

    def _reserve_all(self, batch: list[_Pending]) -> list[tuple[_Pending, PodAssignment]]:
        """Each bind's devices: those claimed on arrival, or (on a retry, or without a
        claim) reserved now, so the next pods' filters see them."""
        chosen: list[tuple[_Pending, PodAssignment]] = []
        for pending in batch:
            claim, pending.claim = pending.claim, NO_CLAIM  # a retry chooses afresh
            if claim.assignment is not None:
                assignment, pending.assumed = claim.assignment, claim.assumed
            else:
                try:
                    assignment, pending.assumed = self._reserve(pending.args, pending.request)
                except BindError as exc:
                    pending.fail(str(exc))
                    continue
            chosen.append((pending, assignment))
        return chosen

    # ----------------------------------------------------------------- commit
    def _commit(self, args: BindRequest, request: PodRequest, claim: Claim) -> _Pending:
        pending = _Pending(args, request, claim)
        self._writes.submit(args.node, pending)
        if pending.assignment is None:
            raise BindError(pending.error or f"bind {args.key}: not written")
        return pending

    def _commit_batch(self, node: str, batch: list[_Pending]) -> None:
        """Write the rows of binds to ``node`` in one transaction (their turn at the
        node); those the store refuses because the node changed meanwhile are chosen
        again, after learning the node from the store, up to ``retries`` rounds."""
        remaining = batch
        try:
            for _attempt in range(self._retries):
                remaining = self._commit_round(node, remaining)
                if not remaining:
                    return
        except BaseException as exc:
            for pending in batch:  # the others in the batch learn it too
                if not pending.settled:
                    self._unreserve(pending)
                    pending.fail(f"bind {pending.args.key}: {type(exc).__name__}: {exc}")
            raise
        for pending in remaining:
            pending.fail(f"bind {pending.args.key}: node {node} no longer fits: {pending.refused}")

    def _commit_round(self, node: str, batch: list[_Pending]) -> list[_Pending]:
        """One transaction for ``batch``; returns the binds to choose for again."""
        chosen = self._reserve_all(batch)
        if not chosen:
            return []
        self._on_batch(len(chosen))
        try:
            refusals = self._store.commit(
                [
                    store.Reservation(
                        p.args.uid, p.args.namespace, p.args.pod_name, a, mutex=p.request.mutex
                    )
                    for p, a in chosen
                ],
                bound=self._publisher.bound_at_commit,
            )
        except store.StoreError as exc:
            for pending, _ in chosen:
                self._unreserve(pending)
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
                pending.assignment, pending.committed = assignment, True
                continue
            self._unreserve(pending)
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
            self._store.learn_node(node)
        return again

    def _drop_stale_reservation(self, args: BindRequest, exc: store.AlreadyAllocated) -> bool:
        """A reservation left by an earlier attempt of this pod, which the API shows
        unbound (checked in step 0), is undone so the retry can proceed. Rows written
        bound at commit never wait for a Binding: none is an earlier attempt's."""
        if self._publisher.bound_at_commit or exc.state != store.AllocationState.RESERVED.value:
            return False
        self._store.delete_reservation(args.uid)
        self._cluster.release(args.uid)
        logger.info("bind %s: dropped the reservation of an earlier attempt", args.key)
        return True

    # ----------------------------------------------------------------- unreserve
    def _unreserve(self, pending: _Pending) -> None:
        """Undo what of the bind's reservation is in place: its committed rows (deleted)
        and the devices it holds in the index (released). Each part goes once, so a
        second call does nothing, even after the pod was reserved again meanwhile."""
        if pending.committed:
            pending.committed = False
            try:
                self._store.delete_reservation(pending.args.uid)
            except store.StoreError as exc:
                # The rows stay reserved; reconcile releases them once the TTL has passed.
                logger.error("bind %s: reservation not undone: %s", pending.args.key, exc)
            finally:
                self._cluster.release(pending.args.uid)
            return
        if pending.assumed or pending.claim.assumed:
            self._cluster.release(pending.args.uid)
        pending.assumed, pending.claim = False, NO_CLAIM

    # ----------------------------------------------------------------- publish
    def _publish(self, pending: _Pending) -> str:
        args, assignment = pending.args, pending.assignment
        assert assignment is not None  # committed
        held = NO_LOCKS
        try:
            if self._locks is not None:
                held = self._locks.acquire(
                    args.node, args.namespace, args.pod_name, pending.request
                )
            annotations = self._cluster.vendors.bind_annotations(
                assignment, bind_time=int(self._clock().timestamp()), request=pending.request
            )
            try:
                self._create_binding(args, annotations)
            except OutcomeUnknown as exc:
                self._settle(args, annotations, exc)
        except _Unsettled as exc:
            # Maybe bound: the devices stay taken, the rows reserved, until the
            # reconcile finds the pod bound (marks them) or not (releases them). The
            # node locks stay too: were the pod bound, another pod allocating on the
            # node meanwhile could be handed its devices by the device plugin, which
            # releases them after Allocate; unbound, they expire.
            message = f"bind {args.key} to {args.node}: {exc}"
            logger.warning("%s", message)
            self._record(args, "BindingFailed", message, "Warning")
            return message
        except Exception as exc:  # any failure after the insert must undo it
            try:
                self._unreserve(pending)
            finally:
                self._release_locks(held)
            message = f"bind {args.key} to {args.node}: {exc}"
            self._record(args, "BindingFailed", message, "Warning")
            return message
        self._store.mark_bound(args.uid)
        if self._success_events:
            devices = ",".join(assignment.device_uuids)
            self._record(args, "BindingSucceed", f"bound to {args.node} with devices {devices}")
        return ""

    def _create_binding(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        try:
            self._publisher.post_binding(args, annotations)
        except AlreadyBound as exc:
            if exc.node != args.node:
                raise
            # Bound to this very node by someone else meanwhile, with annotations
            # that may not be ours: write ours, so the pod runs with the devices
            # recorded, and the allocation stands.
            self._adopt(args, annotations)

    def _adopt(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        self._publisher.annotate(args, annotations)
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
        deadline = time.monotonic() + self._check_window_s
        pause = CHECK_INTERVAL_S
        while True:
            try:
                pod = self._publisher.read_pod(args)
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
        vendors = self._cluster.vendors
        keys = (vendors.node_annotation, *vendors.assignment_keys())
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

    def _bind_unmanaged(self, args: BindRequest) -> None:
        """A pod that asks for no managed device: bind it, nothing to record."""
        try:
            self._publisher.post_binding(args, None)
        except KubeError as exc:
            raise BindError(f"bind {args.key} to {args.node}: {exc}") from None

    def _release_locks(self, held: HeldLocks) -> None:
        """Release the locks a failed bind took (each failure is logged there)."""
        if self._locks is not None and held.taken:
            self._locks.release(held)
