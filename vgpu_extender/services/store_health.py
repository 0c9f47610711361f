"""Whether the store can be reached, as readiness reports it.

Two sources feed it: a cheap probe (check out a connection, ``SELECT 1``) every
``interval_s`` on a thread of its own, and every error the engine reports that says the
store cannot be reached (a bind, an admin read, a background pass). Readiness flips
with hysteresis: unavailable after ``unready_after`` failures in a row, available again
only after ``ready_after`` successful probes in a row, so one lost connection does not
take the replica out of its Service and one lucky probe does not put it back.

Failures are logged through one ``ThrottledLog``: a line per kind of failure per
interval, whoever met it.

It is also what the layers above the services know of store failures: which
exceptions they are (``STORE_FAILURES``) and the ``StoreError`` each stands for
(``classify``); the driver's side of all this stays in ``store.health``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from vgpu_extender.log_throttle import DEFAULT_INTERVAL_S, ThrottledLog
from vgpu_extender.store.errors import FAILURES as STORE_FAILURES
from vgpu_extender.store.errors import (
    StoreError,
    StoreUnavailable,
    classify,
    first_line,
    is_unavailable,
)
from vgpu_extender.store.health import EngineError, listen_errors, ping
from vgpu_extender.store.sessions import Engine

__all__ = ["STORE_FAILURES", "StoreError", "StoreHealth", "StoreStatus", "classify"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoreStatus:
    available: bool
    detail: str


class StoreHealth:
    """The store's reachability over time, for readiness and for the logs."""

    def __init__(
        self,
        engine: Engine,
        *,
        interval_s: float = 2.0,
        unready_after: int = 3,
        ready_after: int = 3,
        log_interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_error: Callable[[], None] | None = None,
    ) -> None:
        """``on_error`` is called for every error the engine reports, from ``start``
        to ``stop`` (the error counter of the metrics)."""
        self._engine = engine
        self._count_error = on_error
        self._stop_listening: list[Callable[[], None]] = []
        self._interval_s = interval_s
        self._unready_after = unready_after
        self._ready_after = ready_after
        self._clock = clock
        self.log = ThrottledLog(logger, interval_s=log_interval_s)
        self._lock = threading.Lock()
        self._available = True
        self._failures = 0  # in a row
        self._successes = 0  # probes in a row
        self._reason = ""
        self._since = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- state
    @property
    def available(self) -> bool:
        with self._lock:
            return self._available

    def status(self) -> StoreStatus:
        with self._lock:
            if self._available:
                return StoreStatus(True, "reachable")
            since = self._since.isoformat(timespec="seconds")
            return StoreStatus(False, f"unreachable since {since}: {self._reason}")

    def failed(self, reason: str) -> None:
        """One failure that says the store cannot be reached."""
        with self._lock:
            self._failures += 1
            self._successes = 0
            self._reason = reason
            flipped = self._available and self._failures >= self._unready_after
            if flipped:
                self._available = False
                self._since = self._clock()
        if flipped:
            logger.error("store unavailable: readiness fails until it answers again: %s", reason)
        else:
            self.log.warning(StoreUnavailable.__name__, "store unavailable: %s", reason)

    def succeeded(self) -> None:
        """One successful probe."""
        with self._lock:
            self._successes += 1
            self._failures = 0
            flipped = not self._available and self._successes >= self._ready_after
            if flipped:
                self._available = True
                self._since = self._clock()
        if flipped:
            logger.warning("store reachable again: readiness restored")

    def report(self, error: BaseException, *, where: str) -> None:
        """Log a store error met by ``where`` (a request, a worker), throttled by kind.

        A failure to reach the store is counted already (the engine reported it): only
        the line is written here, and only if none of its kind was lately.
        """
        classified = classify(error)
        self.log.warning(type(classified).__name__, "%s: %s", where, classified)

    # ----------------------------------------------------------------- probing
    def probe(self) -> bool:
        """Check out a connection and run ``SELECT 1``; record and return the outcome.

        On the raw driver cursor: SQLite's transactions begin ``IMMEDIATE`` (taking the
        write lock), which a probe must not do.
        """
        try:
            ping(self._engine)
        except StoreUnavailable as exc:
            self.failed(exc.message)  # opening it failed: the engine did not count it
            return False
        except Exception as exc:  # whatever the driver raises is a failure
            self.failed(first_line(exc))
            return False
        self.succeeded()
        return True

    def _on_error(self, reported: EngineError) -> None:
        """Every engine error that says the store is out of reach counts as a failure
        (a pre-ping's is the pool's own retry); the probe's are counted by the probe."""
        if reported.is_pre_ping or threading.current_thread() is self._thread:
            return
        if reported.is_disconnect or is_unavailable(reported.error):
            self.failed(first_line(reported.error))

    def _counted(self, reported: EngineError) -> None:
        if self._count_error is not None:
            self._count_error()

    def start(self) -> None:
        if self._thread is not None:
            return
        if self._count_error is not None:
            self._stop_listening.append(listen_errors(self._engine, self._counted))
        self._stop_listening.append(listen_errors(self._engine, self._on_error))
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vgpu-store-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(self._interval_s + 10.0)
        while self._stop_listening:
            self._stop_listening.pop()()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.probe()
