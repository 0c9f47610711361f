"""HAMi's node locks: the shared ``hami.io/mutex.lock`` node annotation (``NodeLock``)
and a vendor's own lock holding a bare time (``TimeLock``: Cambricon's
``cambricon.com/dsmlu.lock``).

Bind takes the shared lock and HAMi's device plugin releases it after ``Allocate``; it
serialises bind-to-Allocate per node and tells the device plugin which pod Allocate is
for (kubelet does not say). The value is ``<RFC3339>,<namespace>,<pod>``; the legacy
value is the timestamp alone.

Taking it is a merge patch conditional on the node's resourceVersion, retried with
backoff when another writer got there first. A lock older than ``timeout`` (HAMi's
``--node-lock-timeout``, 5 minutes) or whose owner pod no longer exists is stale and
is taken over in the same conditional patch. A lock held by the asking pod counts as
taken, so a retried bind does not lock itself out.

A ``TimeLock`` names no owner: it is taken when absent or past its expiry, refused while
fresh or unreadable (the vendor's rules), in the same kind of conditional patch, and
released only while it still holds the value this process wrote.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vgpu_extender.kube import objects
from vgpu_extender.kube.bodies import rfc3339
from vgpu_extender.kube.client import KubeClient
from vgpu_extender.kube.errors import Conflict, NodeLockContention, NotFound
from vgpu_extender.kube.objects import KubeObject

logger = logging.getLogger(__name__)

LOCK_ANNOTATION = "hami.io/mutex.lock"
DEFAULT_TIMEOUT = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class LockValue:
    """A parsed lock. ``namespace`` and ``pod`` are empty for the legacy form."""

    taken_at: datetime
    namespace: str = ""
    pod: str = ""

    @classmethod
    def parse(cls, value: str) -> LockValue:
        """Read ``<RFC3339>,<ns>,<pod>`` or a bare ``<RFC3339>``; ``ValueError`` names the value."""
        parts = value.split(",")
        if len(parts) not in (1, 3):
            raise ValueError(
                f"{LOCK_ANNOTATION} must be '<RFC3339>,<namespace>,<pod>', got {value!r}"
            )
        try:
            taken_at = datetime.fromisoformat(parts[0].strip())
        except ValueError:
            raise ValueError(
                f"{LOCK_ANNOTATION} must start with an RFC3339 time, got {value!r}"
            ) from None
        if taken_at.tzinfo is None:
            raise ValueError(f"{LOCK_ANNOTATION} time must carry a zone, got {value!r}")
        if len(parts) == 1:
            return cls(taken_at)
        return cls(taken_at, parts[1].strip(), parts[2].strip())

    def format(self) -> str:
        return f"{rfc3339(self.taken_at)},{self.namespace},{self.pod}"

    def owned_by(self, namespace: str, pod: str) -> bool:
        return bool(self.pod) and (self.namespace, self.pod) == (namespace, pod)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retries on a write conflict: ``steps`` tries, ``initial_s`` doubling, with jitter.

    The defaults are HAMi's (5 steps, 100 ms, factor 2, jitter 0.5).
    """

    steps: int = 5
    initial_s: float = 0.1
    factor: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"backoff steps must be at least 1, got {self.steps!r}")
        if self.initial_s < 0 or self.factor < 1 or self.jitter < 0:
            raise ValueError(f"backoff values out of range: {self!r}")

    def delays(self) -> list[float]:
        """The sleeps between tries (one fewer than ``steps``)."""
        out, delay = [], self.initial_s
        for _ in range(self.steps - 1):
            out.append(delay * (1 + self.jitter * random.random()))
            delay *= self.factor
        return out


#: What a lock's writer does with the node it read: the annotations to patch, or None
#: (nothing to write). It raises to refuse.
_Plan = Callable[[KubeObject], dict[str, str | None] | None]


class _AnnotationLock:
    """A node annotation written by a merge patch conditional on the node's
    resourceVersion, retried with backoff when another writer got there first."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._kube = kube
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._sleep = sleep
        # One writer per node in this process, as HAMi does: conflicts then come only
        # from other processes, and the backoff is not spent on our own threads.
        self._node_mutexes: dict[str, threading.Lock] = {}
        self._mutexes_guard = threading.Lock()

    def _write(
        self, node: str, plan: _Plan, lost: str, *, gone: bool = False, suffix: str = ""
    ) -> bool:
        """Read the node, patch what ``plan`` says, conditionally; retried on a lost
        race. Returns whether a patch was written; raises ``NodeLockContention`` naming
        ``lost`` (and ``suffix``) when every try lost, ``NotFound`` for a missing node
        unless ``gone`` (then: nothing written)."""
        with self._mutex(node):
            delays = self._backoff.delays()
            for attempt in range(self._backoff.steps):
                try:
                    current = self._node(node)
                except NotFound:
                    if gone:
                        return False
                    raise
                patch = plan(current)
                if patch is None:
                    return False
                try:
                    self._kube.patch_node_annotations(
                        node, patch, resource_version=objects.resource_version(current)
                    )
                    return True
                except Conflict:
                    if attempt < len(delays):
                        self._sleep(delays[attempt])
            raise NodeLockContention(
                f"node {node}: lost the race {lost} {self._backoff.steps} times{suffix}"
            )

    def _node(self, node: str) -> KubeObject:
        current = self._kube.get_node(node)
        if current is None:
            raise NotFound(f"node lock: node {node!r} not found", status=404, reason="NotFound")
        return current

    def _mutex(self, node: str) -> threading.Lock:
        with self._mutexes_guard:
            return self._node_mutexes.setdefault(node, threading.Lock())


class NodeLock(_AnnotationLock):
    """Takes and releases HAMi's shared node lock through a :class:`KubeClient`."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        timeout: timedelta = DEFAULT_TIMEOUT,
        backoff: Backoff | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if timeout <= timedelta(0):
            raise ValueError(f"node lock timeout must be positive, got {timeout!r}")
        super().__init__(kube, backoff=backoff, clock=clock, sleep=sleep)
        self._timeout = timeout

    def time_lock(
        self,
        annotation: str,
        *,
        expires_after: timedelta,
        stamp: Callable[[datetime], str],
        held: Callable[[str, datetime], bool],
    ) -> TimeLock:
        """A vendor's own lock through the same client, clock and backoff."""
        return TimeLock(
            self._kube,
            annotation,
            expires_after=expires_after,
            stamp=stamp,
            held=held,
            backoff=self._backoff,
            clock=self._clock,
            sleep=self._sleep,
        )

    def holder(self, node: str) -> LockValue | None:
        """The current lock of ``node``; ``None`` when unlocked. Raises ``NotFound``."""
        lock = _read_lock(self._node(node))
        return lock if isinstance(lock, LockValue) else None

    def acquire(self, node: str, namespace: str, pod: str) -> None:
        """Lock ``node`` for ``namespace/pod``.

        Raises ``NodeLockContention`` while another pod's lock is fresh, or when every
        try lost a write race; ``NotFound`` when the node does not exist.
        """
        if not node or not namespace or not pod:
            raise ValueError(
                f"node lock needs node, namespace and pod, got {node!r}, {namespace!r}, {pod!r}"
            )

        def plan(current: KubeObject) -> dict[str, str | None] | None:
            lock = _read_lock(current)
            if isinstance(lock, LockValue) and lock.owned_by(namespace, pod):
                return None
            if lock is not None:
                self._check_stale(node, lock)
            return {LOCK_ANNOTATION: LockValue(self._clock(), namespace, pod).format()}

        self._write(node, plan, f"for {LOCK_ANNOTATION}", suffix=": node lock contention")

    def release(self, node: str, namespace: str, pod: str) -> bool:
        """Remove the lock if ``namespace/pod`` holds it (or it has no owner).

        Returns whether a lock was removed. A missing node counts as released.
        """

        def plan(current: KubeObject) -> dict[str, str | None] | None:
            lock = _read_lock(current)
            if lock is None:
                return None
            if isinstance(lock, LockValue) and lock.pod and not lock.owned_by(namespace, pod):
                logger.info(
                    "node %s: lock held by %s/%s, not released for %s/%s",
                    node,
                    lock.namespace,
                    lock.pod,
                    namespace,
                    pod,
                )
                return None
            return {LOCK_ANNOTATION: None}

        return self._write(node, plan, f"to release {LOCK_ANNOTATION}", gone=True)

    # ----- internals -----------------------------------------------------------------

    def _check_stale(self, node: str, lock: LockValue | str) -> None:
        """Return when the lock may be taken over; raise ``NodeLockContention`` otherwise."""
        if isinstance(lock, str):
            logger.warning("node %s: unreadable %s %r taken over", node, LOCK_ANNOTATION, lock)
            return
        age = self._clock() - lock.taken_at
        if age > self._timeout:
            logger.info(
                "node %s: lock of %s/%s is %s old, taken over", node, lock.namespace, lock.pod, age
            )
            return
        if lock.pod and self._kube.get_pod(lock.namespace, lock.pod) is None:
            logger.info(
                "node %s: lock owner %s/%s is gone, taken over", node, lock.namespace, lock.pod
            )
            return
        owner = f" by {lock.namespace}/{lock.pod}" if lock.pod else ""
        raise NodeLockContention(
            f"node {node} has been locked{owner} within {_go_duration(self._timeout)}: "
            "node lock contention"
        )


class TimeLock(_AnnotationLock):
    """A vendor's own node lock holding only the time it was taken (no owner), with
    HAMi's rules for it given as ``stamp`` (the value for a time) and ``held`` (whether
    a value still stands at a time; ``ValueError`` for an unreadable one, which refuses
    the bind as HAMi does). Past ``expires_after`` it is taken over."""

    def __init__(
        self,
        kube: KubeClient,
        annotation: str,
        *,
        expires_after: timedelta,
        stamp: Callable[[datetime], str],
        held: Callable[[str, datetime], bool],
        backoff: Backoff | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not annotation:
            raise ValueError("a time lock needs an annotation name")
        if expires_after <= timedelta(0):
            raise ValueError(f"{annotation} expiry must be positive, got {expires_after!r}")
        super().__init__(kube, backoff=backoff, clock=clock, sleep=sleep)
        self._annotation = annotation
        self._expires_after = expires_after
        self._stamp = stamp
        self._held = held

    @property
    def annotation(self) -> str:
        return self._annotation

    def acquire(self, node: str) -> str:
        """Lock ``node``; returns the value written (for ``release``). Raises
        ``NodeLockContention`` while a fresh or unreadable lock is there, or when every
        try lost a write race; ``NotFound`` when the node does not exist."""
        if not node:
            raise ValueError(f"{self._annotation} needs a node name")
        written = ""

        def plan(current: KubeObject) -> dict[str, str | None] | None:
            nonlocal written
            now = self._clock()
            value = objects.annotations(current).get(self._annotation)
            if value:
                self._check_stale(node, value, now)
            written = self._stamp(now)
            return {self._annotation: written}

        self._write(node, plan, f"for {self._annotation}", suffix=": node lock contention")
        return written

    def release(self, node: str, value: str) -> bool:
        """Remove the lock while it still holds ``value`` (another bind may have taken
        it over since it expired). Returns whether it was removed; a missing node counts
        as released."""

        def plan(current: KubeObject) -> dict[str, str | None] | None:
            present = objects.annotations(current).get(self._annotation)
            if present != value:
                if present:
                    logger.info(
                        "node %s: %s is %r now, not ours (%r): left",
                        node,
                        self._annotation,
                        present,
                        value,
                    )
                return None
            return {self._annotation: None}

        return self._write(node, plan, f"to release {self._annotation}", gone=True)

    def _check_stale(self, node: str, value: str, now: datetime) -> None:
        """Return when the lock may be taken over; raise ``NodeLockContention`` otherwise."""
        try:
            held = self._held(value, now)
        except ValueError:
            raise NodeLockContention(
                f"node {node} is locked by {self._annotation}={value!r}, which is not an "
                "RFC3339 time (the vendor's device plugin or an operator must remove it): "
                "node lock contention"
            ) from None
        if held:
            raise NodeLockContention(
                f"node {node} has been locked within {_minutes(self._expires_after)} "
                f"({self._annotation} taken at {value}): node lock contention"
            )
        logger.info("node %s: %s of %s has expired, taken over", node, self._annotation, value)


def _read_lock(node: KubeObject) -> LockValue | str | None:
    """The node's lock: parsed, the raw string when unreadable, ``None`` when absent."""
    value = objects.annotations(node).get(LOCK_ANNOTATION)
    if not value:
        return None
    try:
        return LockValue.parse(value)
    except ValueError:
        return value


def _minutes(delta: timedelta) -> str:
    """HAMi's words for a lock expiry: ``2 minutes``."""
    total = int(delta.total_seconds())
    if total % 60:
        return f"{total} seconds"
    minutes = total // 60
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def _go_duration(delta: timedelta) -> str:
    """Go's ``time.Duration`` string for whole seconds (``5m0s``), as HAMi's message has it."""
    total = int(delta.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"
