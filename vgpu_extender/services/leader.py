"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go does it.

Only readiness depends on it: every replica keeps its index in step with the store and
the API server, so any of them answers correctly; a replica that does not lead reports
not ready, and a Service then sends it no webhook or admin traffic.

A Lease held by someone else counts as expired only once this replica has watched the
same record, unrenewed, for the Lease's duration (measured on the local monotonic clock,
never by comparing wall clocks of two machines). This replica stops counting itself
leader when it could not renew for the renew deadline (two thirds of the duration), so
two replicas never both report ready for long. Stopping gives the Lease up, so the next
replica takes over at once instead of after a full duration.
"""

from __future__ import annotations

import copy
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vgpu_extender.kube import Conflict, KubeClient, KubeError, KubeObject

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Where the Lease lives, who we are, and its timing (client-go's 15 s / 10 s / 2 s)."""

    namespace: str
    name: str
    identity: str
    duration_s: int = 15

    @property
    def renew_deadline_s(self) -> float:
        return self.duration_s * 2 / 3

    @property
    def retry_period_s(self) -> float:
        return self.duration_s / 7.5


@dataclass(frozen=True, slots=True)
class LeaderStatus:
    """What readiness reports: whether we lead, who does, and why not."""

    leading: bool
    holder: str
    detail: str


def default_identity() -> str:
    return socket.gethostname() or "vgpu-extender"


def micro_time(moment: datetime) -> str:
    """A Kubernetes ``MicroTime``: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and renews one Lease in a background thread; ``status()`` is thread-safe."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        config: LeaseConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._config = config
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The record last seen (holder, renewTime, duration) and when it was first seen.
        self._observed: tuple[str, str, int] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self._holder = ""
        self._detail = "no attempt yet"

    @property
    def config(self) -> LeaseConfig:
        return self._config

    # ----------------------------------------------------------------- reading
    def status(self) -> LeaderStatus:
        with self._lock:
            leading = self._leading_locked()
            detail = "leading" if leading else self._detail
            return LeaderStatus(leading, self._holder, detail)

    def _leading_locked(self) -> bool:
        if self._renewed_at is None:
            return False
        return self._monotonic() - self._renewed_at < self._config.renew_deadline_s

    # ----------------------------------------------------------------- life cycle
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="vgpu-leader", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """End the loop and give the Lease up if we hold it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.release()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self._config.retry_period_s)

    # ----------------------------------------------------------------- one attempt
    def step(self) -> bool:
        """Try once to acquire or renew the Lease. Returns whether we lead now."""
        cfg = self._config
        try:
            lease = self._kube.get_lease(cfg.namespace, cfg.name)
            if lease is None:
                self._kube.create_lease(cfg.namespace, self._record(None))
                self._won(cfg.identity)
                return True
            holder, renew_time, duration = _spec_of(lease)
            now = self._monotonic()
            with self._lock:
                if self._observed != (holder, renew_time, duration):
                    self._observed = (holder, renew_time, duration)
                    self._observed_at = now
                observed_at = self._observed_at
            if holder and holder != cfg.identity and now - observed_at < duration:
                self._lost(holder, f"{holder} holds lease {cfg.namespace}/{cfg.name}")
                return False
            self._kube.replace_lease(cfg.namespace, self._record(lease))
            self._won(cfg.identity)
            return True
        except Conflict:
            self._lost(self._holder, "another replica updated the lease first")
        except KubeError as exc:
            logger.warning("leader election: %s", exc)
            with self._lock:
                self._detail = f"lease {cfg.namespace}/{cfg.name} unavailable: {exc}"
        with self._lock:
            return self._leading_locked()

    def release(self) -> None:
        """Give the Lease up (empty holder, 1 s duration) if we hold it."""
        with self._lock:
            held = self._renewed_at is not None
            self._renewed_at = None
            self._detail = "stopped"
        if not held:
            return
        cfg = self._config
        try:
            lease = self._kube.get_lease(cfg.namespace, cfg.name)
            if lease is None or _spec_of(lease)[0] != cfg.identity:
                return
            body = copy.deepcopy(dict(lease))
            spec = body.setdefault("spec", {})
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = micro_time(self._clock())
            self._kube.replace_lease(cfg.namespace, body)
            logger.info("leader election: released lease %s/%s", cfg.namespace, cfg.name)
        except KubeError as exc:
            logger.warning("leader election: lease not released: %s", exc)

    # ----------------------------------------------------------------- internals
    def _record(self, lease: KubeObject | None) -> dict[str, Any]:
        """The Lease as we want it: ours, renewed now; acquire time kept while we hold it."""
        cfg = self._config
        now = micro_time(self._clock())
        if lease is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": {"leaseTransitions": 0},
            }
        else:
            body = copy.deepcopy(dict(lease))
        spec = body.setdefault("spec", {})
        previous = spec.get("holderIdentity") or ""
        if previous != cfg.identity:
            spec["acquireTime"] = now
            if lease is not None:
                spec["leaseTransitions"] = _int(spec.get("leaseTransitions")) + 1
        spec["holderIdentity"] = cfg.identity
        spec["leaseDurationSeconds"] = cfg.duration_s
        spec["renewTime"] = now
        return body

    def _won(self, holder: str) -> None:
        with self._lock:
            if self._renewed_at is None:
                logger.info("leader election: now leading as %s", holder)
            self._renewed_at = self._monotonic()
            self._holder = holder
            self._detail = "leading"

    def _lost(self, holder: str, detail: str) -> None:
        with self._lock:
            if self._renewed_at is not None and self._leading_locked():
                logger.warning("leader election: no longer leading: %s", detail)
            self._renewed_at = None
            self._holder = holder
            self._detail = detail


def _spec_of(lease: Mapping[str, Any]) -> tuple[str, str, int]:
    spec = lease.get("spec") or {}
    if not isinstance(spec, Mapping):
        spec = {}
    holder = spec.get("holderIdentity") or ""
    duration = _int(spec.get("leaseDurationSeconds")) or 1
    return str(holder), str(spec.get("renewTime") or ""), duration


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
