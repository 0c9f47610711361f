"""HAMi's node lock: the ``hami.io/mutex.lock`` node annotation.

Bind takes it and HAMi's device plugin releases it after ``Allocate``; it serialises
bind-to-Allocate per node and tells the device plugin which pod Allocate is for
(kubelet does not say). The value is ``<RFC3339>,<namespace>,<pod>``; the legacy
value is the timestamp alone.

Taking it is a merge patch conditional on the node's resourceVersion, retried with
backoff when another writer got there first. A lock older than ``timeout`` (HAMi's
``--node-lock-timeout``, 5 minutes) or whose owner pod no longer exists is stale and
is taken over in the same conditional patch. A lock held by the asking pod counts as
taken, so a retried bind does not lock itself out.
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


class NodeLock:
    """Takes and releases the node lock through a :class:`KubeClient`."""

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
        self._kube = kube
        self._timeout = timeout
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._sleep = sleep
        # One writer per node in this process, as HAMi does: conflicts then come only
        # from other processes, and the backoff is not spent on our own threads.
        self._node_mutexes: dict[str, threading.Lock] = {}
        self._mutexes_guard = threading.Lock()

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
        with self._mutex(node):
            delays = self._backoff.delays()
            for attempt in range(self._backoff.steps):
                current = self._node(node)
                lock = _read_lock(current)
                if isinstance(lock, LockValue) and lock.owned_by(namespace, pod):
                    return
                if lock is not None:
                    self._check_stale(node, lock)
                value = LockValue(self._clock(), namespace, pod).format()
                try:
                    self._kube.patch_node_annotations(
                        node,
                        {LOCK_ANNOTATION: value},
                        resource_version=objects.resource_version(current),
                    )
                    return
                except Conflict:
                    if attempt < len(delays):
                        self._sleep(delays[attempt])
            raise NodeLockContention(
                f"node {node}: lost the race for {LOCK_ANNOTATION} "
                f"{self._backoff.steps} times: node lock contention"
            )

    def release(self, node: str, namespace: str, pod: str) -> bool:
        """Remove the lock if ``namespace/pod`` holds it (or it has no owner).

        Returns whether a lock was removed. A missing node counts as released.
        """
        with self._mutex(node):
            delays = self._backoff.delays()
            for attempt in range(self._backoff.steps):
                try:
                    current = self._node(node)
                except NotFound:
                    return False
                lock = _read_lock(current)
                if lock is None:
                    return False
                if isinstance(lock, LockValue) and lock.pod and not lock.owned_by(namespace, pod):
                    logger.info(
                        "node %s: lock held by %s/%s, not released for %s/%s",
                        node,
                        lock.namespace,
                        lock.pod,
                        namespace,
                        pod,
                    )
                    return False
                try:
                    self._kube.patch_node_annotations(
                        node,
                        {LOCK_ANNOTATION: None},
                        resource_version=objects.resource_version(current),
                    )
                    return True
                except Conflict:
                    if attempt < len(delays):
                        self._sleep(delays[attempt])
            raise NodeLockContention(
                f"node {node}: lost the race to release {LOCK_ANNOTATION} "
                f"{self._backoff.steps} times"
            )

    # ----- internals -----------------------------------------------------------------

    def _node(self, node: str) -> KubeObject:
        current = self._kube.get_node(node)
        if current is None:
            raise NotFound(f"node lock: node {node!r} not found", status=404, reason="NotFound")
        return current

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

    def _mutex(self, node: str) -> threading.Lock:
        with self._mutexes_guard:
            return self._node_mutexes.setdefault(node, threading.Lock())


def _read_lock(node: KubeObject) -> LockValue | str | None:
    """The node's lock: parsed, the raw string when unreadable, ``None`` when absent."""
    value = objects.annotations(node).get(LOCK_ANNOTATION)
    if not value:
        return None
    try:
        return LockValue.parse(value)
    except ValueError:
        return value


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
