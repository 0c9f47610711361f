"""Keeping the store and the index in step with Kubernetes: watches and reconcile.

- Nodes: the device plugin's inventory annotation is applied on every change. A
  deleted node is forgotten, unless pods still hold its devices: then it stays,
  marked absent, taking no new pod, with its pods' allocations, until they go (a Node
  object deleted and registered again keeps its running pods' GPUs taken).
- Pods: the allocations of deleted, Succeeded or Failed pods are released; a bound pod
  carrying HAMi's allocation annotations that the store does not know is imported
  (placed by another replica, by HAMi, or before a crash). An import never
  over-commits a device: one that would is an allocation conflict (``conflicts``),
  recorded with a Warning Event ``AllocationConflict`` on the pod, and its devices
  take no new pod until it is resolved.
- Reconcile, on start and periodically, compares every live allocation with its pod:
  released when the pod is gone or finished, marked bound when the pod is bound to
  that node, expired when still reserved for an unbound pod after the reservation
  TTL. The start-up check (before readiness) settles every reservation made before the
  process started whose pod is not bound to that node, without waiting for the TTL:
  the bind that made it died with the process before, unless it was another live
  replica's (a rolling update restarts one replica while the other binds). So a
  reservation younger than ``in_flight`` (the longest a live bind holds one before its
  Binding shows on the pod) is settled only once it is that old: passes come again
  until then. It re-derives the
  open conflicts from the pod list, too. What each pass fixed is logged and counted.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from vgpu_extender import store
from vgpu_extender.backoff import Backoff, HealthyReset
from vgpu_extender.domain import AnnotationError, PodAssignment, RequestError
from vgpu_extender.kube import KubeClient, KubeObject, MalformedObject, WatchExpired
from vgpu_extender.kube import objects as kobj
from vgpu_extender.kube.client import Listing, WatchEvent
from vgpu_extender.log_throttle import ThrottledLog
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.conflicts import Conflict, ConflictRegistry, PodRef
from vgpu_extender.services.event_recorder import EventRecorder
from vgpu_extender.services.gone_pods import GonePods
from vgpu_extender.services.inventory import (
    InventoryService,
    NodeView,
    capacity_of,
    collector_paused,
)
from vgpu_extender.services.pacing import Foreground, Pacer
from vgpu_extender.store.errors import StoreUnavailable

logger = logging.getLogger(__name__)
#: A store out of reach fails every pod event and every pod of a pass alike: one line
#: per interval says so.
_unavailable_log = ThrottledLog(logger)


def watch_backoff() -> HealthyReset:
    """A watch loop's retry schedule (a function, so a test can give it a clock)."""
    return HealthyReset(
        Backoff(initial_s=RETRY_INITIAL_S, cap_s=RETRY_CAP_S), healthy_s=WATCH_HEALTHY_S
    )


def _warn(exc: Exception, message: str, *args: object) -> None:
    if isinstance(exc, StoreUnavailable):
        _unavailable_log.warning(StoreUnavailable.__name__, message, *args)
    else:
        logger.warning(message, *args)


#: How long one watch request lasts before it is renewed (also bounds stop latency).
WATCH_TIMEOUT_S = 30
#: Pause after a failed list or watch: exponential with full jitter, from about
#: half a second to at most 30 s, so replicas do not hammer an API server coming back.
RETRY_INITIAL_S = 0.5
RETRY_CAP_S = 30.0
#: A watch that stayed up this long starts the backoff again from its first step.
WATCH_HEALTHY_S = 60.0
#: The watch loops' failures: one line per kind of failure per thread per interval.
_watch_log = ThrottledLog(logger, interval_s=60.0)
#: Until the start-up check is done, passes come at least this often.
STARTUP_RETRY_S = 5.0
#: Nodes looked at per hold of the cluster lock when the absent ones are sought.
NODES_PER_LOCK = 1_000
#: The Warning Event recorded on a pod whose allocation could not be imported.
CONFLICT_EVENT = "AllocationConflict"
#: How long ``stop`` waits for a reconcile pass under way to notice it (one pod's
#: store write, unless the store hangs).
RECONCILE_STOP_S = 5.0

_Item = TypeVar("_Item")


@dataclass(slots=True)
class ReconcileReport:
    """What one pass changed."""

    released_gone: int = 0
    released_finished: int = 0
    released_moved: int = 0
    expired: int = 0
    marked_bound: int = 0
    imported: int = 0
    failed: int = 0

    @property
    def changes(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "failed")

    def add(self, other: ReconcileReport) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True, slots=True)
class FirstSync:
    """How far the first sync with the API server has come."""

    #: Node objects listed (None: the node list is not read yet).
    nodes_listed: int | None = None
    #: Of those, how many are applied to the store and the index.
    nodes_done: int = 0
    #: Whether the pods are being listed and reconciled (the nodes are done).
    pods: bool = False
    done: bool = False

    def describe(self) -> str:
        """Where it stands, in words (for the verbs' answers and readiness)."""
        if self.done:
            return "done"
        if self.nodes_listed is None:
            return "listing the nodes"
        if self.pods:
            return f"{self.nodes_listed} nodes done, reconciling the pods"
        return f"{self.nodes_done} of {self.nodes_listed} nodes"


def _free(items: list[KubeObject], pacer: Pacer, batch: int = 100) -> None:
    """Empty a listing a batch at a time (100 pods: some 0.3 ms), pausing between."""
    while items:
        del items[-batch:]
        pacer.tick()


def node_view(node: KubeObject) -> NodeView:
    return NodeView(
        name=kobj.name(node),
        labels=kobj.labels(node),
        annotations=kobj.annotations(node),
        resource_version=kobj.resource_version(node),
        capacity=capacity_of(node),
    )


class SyncService:
    """Node and pod watches plus the periodic reconcile, each in its own thread."""

    def __init__(
        self,
        *,
        cluster: ClusterState,
        sessions: store.Sessions,
        inventory: InventoryService,
        kube: KubeClient,
        reservation_ttl: timedelta,
        interval_s: float,
        in_flight: timedelta = timedelta(seconds=30),
        conflicts: ConflictRegistry | None = None,
        events: EventRecorder | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        foreground: Foreground | None = None,
    ) -> None:
        self._cluster = cluster
        #: The verbs, which the periodic passes give way to (``pacing``).
        self._foreground = foreground
        self.conflicts = conflicts if conflicts is not None else ConflictRegistry(cluster)
        self._events = events
        self._sessions = sessions
        self._inventory = inventory
        self._kube = kube
        self._ttl = reservation_ttl
        self._in_flight = in_flight
        self._interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: Guards ``_threads``: the first sync's thread starts the loops.
        self._threads_lock = threading.Lock()
        self._first_sync = FirstSync()
        self._gone = GonePods()
        #: Guards ``_on_synced`` against the first sync finishing meanwhile.
        self._synced_lock = threading.Lock()
        self._on_synced: list[Callable[[], None]] = []
        self._reconcile_lock = threading.Lock()
        self.totals = ReconcileReport()
        self.passes = 0
        #: Reservations made before this moment belong to binds of an earlier process.
        self._started_at = clock()
        self._startup_checked = False

    @property
    def startup_checked(self) -> bool:
        """Whether a pass has settled every reservation left by an earlier process
        (released, or marked bound): readiness waits for it."""
        return self._startup_checked

    # ----------------------------------------------------------------- life cycle
    @property
    def synced(self) -> bool:
        """Whether the first sync (every listed node applied, then a reconcile pass over
        the listed pods) is done: until then a pod the store does not know may hold
        devices the index shows free."""
        return self._first_sync.done

    @property
    def first_sync(self) -> FirstSync:
        """How far the first sync has come."""
        return self._first_sync

    def when_synced(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the first sync is done (at once if it is), on the
        thread that finished it."""
        with self._synced_lock:
            if not self._first_sync.done:
                self._on_synced.append(callback)
                return
        callback()

    def start(self) -> None:
        """Start the first sync (nodes, then a reconcile of the pods) in the background,
        the watches and the periodic reconcile once it is done; returns at once, so the
        server answers meanwhile (``synced`` says when the first sync is done)."""
        self._started_at = self._clock()
        self._spawn("vgpu-first-sync", self._first_sync_loop)

    def _first_sync_loop(self) -> None:
        """The first sync, tried again after a pause until it succeeds."""
        backoff = watch_backoff()
        while not self._stop.is_set():
            try:
                versions = self._sync_once()
            except Exception as exc:  # the API or the store: tried again, as a relist is
                if self._stop.is_set():
                    return
                delay = backoff.failed()
                logger.error(
                    "initial sync with Kubernetes failed (retrying in %.1f s): %s", delay, exc
                )
                self._stop.wait(delay)
                continue
            if versions is None:
                return  # stopped between batches
            self._finish_first_sync()
            self._start_loops(*versions)
            return

    def _sync_once(self) -> tuple[str, str] | None:
        """List and apply every node, then list and reconcile every pod; the two
        resourceVersions the watches start from (None when stopped on the way)."""
        self._first_sync = FirstSync()
        listing = self._kube.list_nodes_with_version()
        views = list(self._views(listing.items))
        self._first_sync = FirstSync(nodes_listed=len(views))
        self._inventory.observe_listing(
            views,
            on_progress=self._nodes_done,
            stopping=self._stop.is_set,
        )
        if self._stop.is_set():
            return None
        self._first_sync = FirstSync(nodes_listed=len(views), nodes_done=len(views), pods=True)
        started = self._clock()
        pods = self._kube.list_pods_with_version()
        self.reconcile(pods.items, listed_at=started)
        if self._stop.is_set():
            return None  # the pass may have stopped part way: not synced
        return listing.resource_version, pods.resource_version

    def _nodes_done(self, done: int) -> None:
        self._first_sync = dataclasses.replace(self._first_sync, nodes_done=done)

    def _finish_first_sync(self) -> None:
        done = self._first_sync
        with self._synced_lock:
            self._first_sync = dataclasses.replace(done, done=True)
            callbacks, self._on_synced = self._on_synced, []
        logger.info("first sync with Kubernetes done: %d nodes", done.nodes_listed or 0)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one hook's failure must not stop the watches
                logger.exception("a hook of the first sync failed")

    def _start_loops(self, node_version: str, pod_version: str) -> None:
        self._spawn(
            "vgpu-watch-nodes",
            self._watch_loop,
            self._kube.watch_nodes,
            self._relist_nodes,
            self._on_node,
            node_version,
        )
        self._spawn(
            "vgpu-watch-pods",
            self._watch_loop,
            self._kube.watch_pods,
            self._relist_pods,
            self._on_pod,
            pod_version,
        )
        self._spawn("vgpu-reconcile", self._reconcile_loop)

    def _next_pass_in(self) -> float:
        """Seconds to the next pass: the interval, or sooner while the start-up check
        waits (for the API, the store, or reservations to reach ``in_flight``)."""
        if self._startup_checked:
            return self._interval_s
        due = self._started_at + self._in_flight - self._clock()
        return min(self._interval_s, max(STARTUP_RETRY_S, due.total_seconds()))

    def stop(self, timeout_s: float = 0.5) -> None:
        """Ask the loops to end. A watch blocked on the server ends at its own timeout
        (its thread is a daemon and handles no event after the stop), so the wait here
        is short. A reconcile under way (the first sync's or a periodic one) stops
        before its next pod; this waits for it (up to ``RECONCILE_STOP_S``), so that no
        pass writes the store after the engine is gone."""
        self._stop.set()
        with self._threads_lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout_s / max(1, len(threads)))
        if self._reconcile_lock.acquire(timeout=RECONCILE_STOP_S):
            self._reconcile_lock.release()
        else:
            logger.warning("a reconcile pass did not stop within %.0f s", RECONCILE_STOP_S)

    def _spawn(self, name: str, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._threads_lock:
            if self._stop.is_set():
                return  # the first sync finished as the service stopped
            thread.start()
            self._threads.append(thread)

    # ----------------------------------------------------------------- nodes
    def sync_nodes(self, listing: Listing) -> str:
        self._inventory.observe_listing(list(self._views(listing.items)))
        return listing.resource_version

    def _relist_nodes(self) -> str:
        return self.sync_nodes(self._kube.list_nodes_with_version())

    def _on_node(self, kind: str, node: KubeObject) -> None:
        view = next(iter(self._views([node])), None)
        if view is None:
            return
        if kind == "DELETED":
            if view.name in self._cluster.index:
                if self._inventory.remove(view.name) is store.NodeRemoval.ABSENT:
                    logger.warning(
                        "node %s deleted while its pods hold devices: kept, taking no new "
                        "pod, until they go",
                        view.name,
                    )
                else:
                    logger.info("node %s deleted: forgotten", view.name)
            return
        self._inventory.observe([view])

    def _views(self, nodes: Sequence[KubeObject]) -> Iterator[NodeView]:
        for node in nodes:
            try:
                yield node_view(node)
            except MalformedObject as exc:
                logger.warning("node %r ignored: %s", node.get("metadata"), exc)

    # ----------------------------------------------------------------- pods
    def _relist_pods(self) -> str:
        """After a pod watch expired: the pods listed and reconciled as the periodic
        pass does them (in bursts, the collector paused), the list's version returned."""
        with collector_paused():
            _report, version = self._reconcile_listed_pods(*self._pacers())
        return version

    def _on_pod(self, kind: str, pod: KubeObject) -> None:
        try:
            uid = kobj.uid(pod)
            ours = self._ours(pod)
            if kind == "DELETED" or kobj.is_terminal(pod):
                self._gone.record(uid)  # before the release: see ``_import``
                if self.conflicts.resolve(uid) is not None:
                    logger.info("allocation conflict of pod %s resolved: pod gone", uid)
                if ours or self._cluster.index.allocation(uid) is not None:
                    self._release(uid)
                return
            if ours and kobj.node_name(pod) and self._cluster.index.allocation(uid) is None:
                self._import(pod, ReconcileReport())
        except (MalformedObject, store.StoreError) as exc:
            _warn(exc, "pod event %s for %r not applied: %s", kind, pod.get("metadata"), exc)

    def _ours(self, pod: KubeObject) -> bool:
        return self._cluster.vendors.node_annotation in kobj.annotations(pod)

    # ----------------------------------------------------------------- reconcile
    def reconcile(
        self, pods: Sequence[KubeObject], *, listed_at: datetime, pacer: Pacer | None = None
    ) -> ReconcileReport:
        """One pass over every live allocation and every listed pod.

        ``listed_at`` is when the listing began: reservations made after it belong to
        binds in flight and are left alone, as are reservations younger than the TTL,
        except, until a pass has settled them (``startup_checked``), those made before
        this process started and at least ``in_flight`` ago: no bind still under way, of
        an earlier process or of another replica, holds one that long.

        With a ``pacer`` the pass works in short bursts: it shares the interpreter with
        the verbs, which would otherwise wait for it again and again (``resync``).
        Without one it runs straight through (the first sync, which the verbs wait for
        anyway).
        """
        report = ReconcileReport()
        pacer = pacer if pacer is not None else Pacer(pause_s=0.0)
        with self._reconcile_lock:
            startup = not self._startup_checked
            unsettled = waiting = 0
            by_uid: dict[str, KubeObject] = {}
            for pod in pods:
                pacer.tick()
                try:
                    by_uid[kobj.uid(pod)] = pod
                except MalformedObject as exc:
                    logger.warning("pod ignored by reconcile: %s", exc)
            stored: dict[str, store.PodMeta] = {}
            for meta in self._stored_states():
                pacer.tick()
                stored[meta.uid] = meta
            young = min(listed_at, self._clock() - self._ttl)
            if startup:
                young = max(
                    young, min(listed_at, self._started_at, self._clock() - self._in_flight)
                )
            for uid, meta in self._until_stopped(stored.items(), pacer):
                try:
                    left = self._check(uid, meta, by_uid.get(uid), young, report)
                    if startup and left and meta.created_at < self._started_at:
                        waiting += 1
                except (store.StoreError, MalformedObject) as exc:
                    report.failed += 1
                    unsettled += 1
                    _warn(exc, "reconcile: pod %s: %s", uid, exc)
            for uid, pod in self._until_stopped(by_uid.items(), pacer):
                if uid in stored:
                    continue
                try:
                    if self._ours(pod) and kobj.node_name(pod) and not kobj.is_terminal(pod):
                        self._import(pod, report)
                except (store.StoreError, MalformedObject) as exc:
                    report.failed += 1
                    _warn(exc, "reconcile: import of pod %s: %s", uid, exc)
            if self._stop.is_set():
                # Cut short: the store is not written once ``stop`` has returned, and a
                # pass that did not finish settles nothing.
                logger.info("reconcile stopped part way: the service is stopping")
                return report
            for conflict in self.conflicts.retain_seen_since(listed_at):
                logger.info("allocation conflict of pod %s resolved", conflict.pod.uid)
            self._forget_absent_nodes(pacer)
            self.passes += 1
            self.totals.add(report)
            if startup and not unsettled and not waiting:
                self._startup_checked = True
                logger.info("start-up check of reservations done")
            elif startup and waiting:
                logger.info(
                    "start-up check: %d reservation(s) of an earlier process younger than "
                    "%.0f s, maybe another replica's bind under way; settled once that old",
                    waiting,
                    self._in_flight.total_seconds(),
                )
        if report.changes or report.failed:
            logger.info("reconcile fixed %d allocation(s): %s", report.changes, report)
        return report

    def _stored_states(self) -> Iterator[store.PodMeta]:
        """Every live pod's stored state, read ``STATES_PER_READ`` pods a transaction:
        the caller's pauses fall between the reads, out of any transaction (one read of
        66,000 pods held the interpreter for half a second, the verbs waiting)."""
        after = ""
        while True:
            with self._sessions() as session:
                page = list(store.pod_states(session, after=after, limit=store.STATES_PER_READ))
            yield from page
            if len(page) < store.STATES_PER_READ:
                return
            after = page[-1].uid

    def _until_stopped(self, items: Iterable[_Item], pacer: Pacer) -> Iterator[_Item]:
        """``items`` one at a time, ``pacer`` ticked for each, until the service stops."""
        for item in items:
            if self._stop.is_set():
                return
            pacer.tick()
            yield item

    def _check(
        self,
        uid: str,
        meta: store.PodMeta,
        pod: KubeObject | None,
        young: datetime,
        report: ReconcileReport,
    ) -> bool:
        """Settle one pod's rows; True when a reservation is left to its bind."""
        reserved = meta.state is store.AllocationState.RESERVED
        if pod is None:
            if reserved and meta.created_at >= young:
                return True  # a bind in flight: its pod may be newer than the listing
            self._release(uid)
            report.released_gone += 1
        elif kobj.is_terminal(pod):
            self._release(uid)
            report.released_finished += 1
        elif reserved:
            bound_to = kobj.node_name(pod)
            if bound_to == meta.node:
                with self._sessions.begin() as session:
                    store.mark_bound(session, pod_uid=uid, now=self._clock())
                report.marked_bound += 1
            elif bound_to:
                self._release(uid)
                report.released_moved += 1
            elif meta.created_at < young:
                self._release(uid)
                report.expired += 1
            else:
                return True
        return False

    def _release(self, uid: str) -> None:
        with self._sessions.begin() as session:
            store.release(session, pod_uid=uid, now=self._clock())
        held = self._cluster.release(uid)
        # The pods whose import this one was in the way of may fit now.
        for pod in self.conflicts.waiting_on(uid):
            try:
                self._import(pod, ReconcileReport())
            except (store.StoreError, MalformedObject) as exc:
                _warn(
                    exc, "import of pod %r after release of %s: %s", pod.get("metadata"), uid, exc
                )
        if held is not None:
            self._forget_if_absent(held.node)

    def _forget_if_absent(self, node: str) -> None:
        """Forget a node kept only for its pods' allocations once none is left."""
        with self._cluster.lock:
            index = self._cluster.index
            if (
                node not in index
                or index.inventory(node).problem != store.NODE_ABSENT
                or index.pods_on(node)
            ):
                return
        if self._inventory.remove(node) is store.NodeRemoval.REMOVED:
            logger.info("node %s: its last pod is gone; forgotten", node)

    def _forget_absent_nodes(self, pacer: Pacer) -> None:
        index = self._cluster.index
        with self._cluster.lock:
            names = index.node_names()
        absent: list[str] = []
        # The lock a batch at a time: a filter waits for one batch, not for every node.
        for start in range(0, len(names), NODES_PER_LOCK):
            with self._cluster.lock:
                absent.extend(
                    n
                    for n in names[start : start + NODES_PER_LOCK]
                    if n in index and index.inventory(n).problem == store.NODE_ABSENT
                )
            pacer.pause()
        for node in absent:
            self._forget_if_absent(node)

    def _import(self, pod: KubeObject, report: ReconcileReport) -> None:
        """Record the devices a bound pod's annotations say it holds, unless the watch
        has seen the pod go since the listing it comes from (``GonePods``)."""
        uid = kobj.uid(pod)
        if uid in self._gone:
            return
        assignment = self._annotated(pod)
        if assignment is None:
            report.failed += 1
            return
        try:
            with self._sessions.begin() as session:
                store.import_assignment(
                    session,
                    pod_uid=uid,
                    namespace=kobj.namespace(pod),
                    name=kobj.name(pod),
                    assignment=assignment,
                    now=self._clock(),
                    shares=self._cluster.index.shares,
                )
        except store.AlreadyAllocated:
            # Recorded by another replica: the index learns it from the store.
            self.conflicts.resolve(uid)
            self._cluster.refresh_node(self._sessions, assignment.node)
            return
        except store.ImportConflict as exc:
            self._conflict(pod, exc)
            return
        except store.StoreConflict as exc:
            report.failed += 1
            logger.warning("import of pod %s skipped: %s", kobj.pod_key(pod), exc)
            return
        self._cluster.apply(uid, assignment)
        report.imported += 1
        if self.conflicts.resolve(uid) is not None:
            logger.info("allocation conflict of pod %s resolved: imported", kobj.pod_key(pod))
        if uid in self._gone:
            # Gone while it was imported: the watch's release may have come first.
            self._release(uid)

    def _conflict(self, pod: KubeObject, exc: store.ImportConflict) -> None:
        """Record a pod the store refused to import, and say so once on the pod."""
        now = self._clock()
        with self._sessions() as session:
            on_node = store.assignments(session, node=exc.node)
        held_by = tuple(
            PodRef(uid, on_node[uid].meta.namespace, on_node[uid].meta.name)
            if uid in on_node
            else PodRef(uid, "", "")
            for uid in exc.pods
        )
        conflict = Conflict(
            pod=PodRef(kobj.uid(pod), kobj.namespace(pod), kobj.name(pod)),
            node=exc.node,
            devices=exc.devices,
            held_by=held_by,
            reason=self._cluster.vendors.wording.text(exc.reason) if exc.reason is not None else "",
            message=exc.detail,
            since=now,
            seen=now,
        )
        if not self.conflicts.record(conflict, pod):
            return
        holders = ", ".join(f"{r.namespace}/{r.name}" if r.name else r.uid for r in held_by)
        message = (
            f"GPU {', '.join(exc.devices)} on node {exc.node} cannot also hold this pod "
            f"({exc.detail})" + (f"; held by {holders}" if holders else "") + ": its "
            "allocation is not recorded, and those GPUs take no new pod until the pods "
            "holding them go"
        )
        logger.warning("allocation conflict: pod %s: %s", kobj.pod_key(pod), message)
        if self._events is not None:
            self._events.record(
                namespace=conflict.pod.namespace,
                pod=conflict.pod.name,
                uid=conflict.pod.uid,
                reason=CONFLICT_EVENT,
                message=message,
                type="Warning",
            )

    def _annotated(self, pod: KubeObject) -> PodAssignment | None:
        vendors = self._cluster.vendors
        annotations = kobj.annotations(pod)
        node = annotations.get(vendors.node_annotation, "")
        if not node or node != kobj.node_name(pod):
            return None
        if not any(key in annotations for key in vendors.assignment_keys()):
            return None
        try:
            init = tuple(c.init for c in vendors.parse_pod(pod).containers)
        except RequestError:
            init = ()
        try:
            grants = vendors.decode_assignments(annotations, init=init)
            if grants is None or not any(grants):
                return None
            return PodAssignment(node, grants, init if len(init) == len(grants) else ())
        except (AnnotationError, ValueError) as exc:
            logger.warning("pod %s: allocation annotation unreadable: %s", kobj.pod_key(pod), exc)
            return None

    # ----------------------------------------------------------------- loops
    def _watch_loop(
        self,
        watch: Callable[..., Iterator[WatchEvent]],
        relist: Callable[[], str],
        handle: Callable[[str, KubeObject], None],
        version: str | None,
    ) -> None:
        backoff = watch_backoff()
        while not self._stop.is_set():
            try:
                if version is None:
                    version = relist()
                backoff.connected()
                for kind, obj in watch(version, timeout_s=WATCH_TIMEOUT_S):
                    if self._stop.is_set():
                        return
                    handle(kind, obj)
                    version = obj.get("metadata", {}).get("resourceVersion") or version
            except WatchExpired:
                version = None
            except Exception as exc:  # a broken loop would silently stop syncing
                if self._stop.is_set():
                    return
                delay = backoff.failed()
                thread = threading.current_thread().name
                reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
                _watch_log.warning(
                    # Keyed by kind, not by text: texts carry addresses and versions, and
                    # the throttle keeps every key it has seen.
                    f"{thread}: {type(exc).__name__}",
                    "%s: %s; retrying in %.1f s (try %d)",
                    thread,
                    reason,
                    delay,
                    backoff.backoff.attempts,
                )
                version = None
                self._stop.wait(delay)

    def resync(self, *, nodes: bool = False) -> ReconcileReport:
        """The periodic pass: every pod listed and reconciled (every node relisted
        first, with ``nodes``), in short bursts (``reconcile``).

        The cycle collector is paused meanwhile: the listing's hundreds of thousands of
        objects, alive for the whole pass, made it run full collections over them again
        and again (a second at a time at 10,000 nodes, the verbs waiting). They are
        freed by their reference counts before it runs again, a batch at a time
        (freeing 66,000 pods at once held the interpreter for a quarter of a second).
        """
        pacer, freeing = self._pacers()
        with collector_paused():
            if nodes:
                node_listing = self._kube.list_nodes_with_version(pace=pacer.tick)
                views: list[NodeView] = []
                for view in self._views(node_listing.items):
                    pacer.tick()
                    views.append(view)
                # A pause after each batch of nodes, too.
                self._inventory.observe_listing(views, on_progress=lambda _done: pacer.pause())
                del views
                _free(node_listing.items, freeing)
            report, _version = self._reconcile_listed_pods(pacer, freeing)
        return report

    def _pacers(self) -> tuple[Pacer, Pacer]:
        """A pass's pacers: for its items, and for freeing its listing in batches."""
        return (
            Pacer(foreground=self._foreground),
            Pacer(check_every=1, foreground=self._foreground),  # a batch: hundreds of objects
        )

    def _reconcile_listed_pods(self, pacer: Pacer, freeing: Pacer) -> tuple[ReconcileReport, str]:
        """Every pod listed and reconciled in ``pacer``'s bursts, the listing freed a
        batch at a time; the report and the list's resourceVersion."""
        started = self._clock()
        listing = self._kube.list_pods_with_version(pace=pacer.tick)
        report = self.reconcile(listing.items, listed_at=started, pacer=pacer)
        _free(listing.items, freeing)
        return report, listing.resource_version

    def _reconcile_loop(self) -> None:
        while not self._stop.wait(self._next_pass_in()):
            try:
                self.resync()
            except Exception as exc:  # keep reconciling on the next tick
                _warn(exc, "periodic reconcile failed: %s", exc)
