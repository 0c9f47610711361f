"""Marking a pod's rows bound once its Binding exists: in batches, off the request path.

From the Binding on, the pod holds its devices whatever the store says, and its rows
count already (reserved rows count like bound ones). "Bound" tells reconcile that the
reservation is no longer waiting for a Binding, so it is never expired. That can wait
a moment: a worker marks the pods bound within a few tens of milliseconds in one
transaction, rather than each bind paying a second transaction before it answers.

Whatever is not marked here (the extender stops or crashes first, the queue is full,
the store fails, or the reservation expired meanwhile) stays reserved until reconcile,
which marks reserved rows bound when it finds their pod bound to that node, and
imports a bound pod's devices from its annotations when the store has no live rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from vgpu_extender import store
from vgpu_extender.services.background import BatchWorker
from vgpu_extender.store.errors import FAILURES
from vgpu_extender.store.sessions import Engine

logger = logging.getLogger(__name__)

#: Pods marked in one transaction at most.
BATCH = 256
#: How long the worker gathers pods after the first: a few binds' worth, so that one
#: transaction serves several binds even when they come one after the other.
LINGER_S = 0.05
#: How long stopping waits for the queued pods to be marked.
STOP_TIMEOUT_S = 10.0


class BoundMarker:
    """``mark`` queues a pod whose Binding exists; the worker records it as bound."""

    def __init__(
        self, *, engine: Engine, clock: Callable[[], datetime], capacity: int = 4096
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._worker: BatchWorker[str] = BatchWorker(
            self._mark_all,
            name="vgpu-mark-bound",
            batch=BATCH,
            linger_s=LINGER_S,
            capacity=capacity,
            on_drop=self._dropped,
        )

    def mark(self, pod_uid: str) -> None:
        self._worker.submit(pod_uid)

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        """Mark what was queued before (after the last bind), then end the worker."""
        self._worker.stop(STOP_TIMEOUT_S)

    def _mark_all(self, pod_uids: list[str]) -> None:
        try:
            with self._engine.begin() as connection:
                gone = store.mark_many_bound(connection, pod_uids=pod_uids, now=self._clock())
        except FAILURES as exc:  # the database may be down
            logger.error("%d bound pod(s) not recorded as bound yet: %s", len(pod_uids), exc)
            return
        for uid in sorted(gone):
            # Released or expired while its bind was in flight: reconcile decides from
            # the pod itself (imported if it is bound and still there).
            logger.warning("pod %s bound, but its reservation was gone: left to reconcile", uid)

    @staticmethod
    def _dropped() -> None:
        logger.warning("a bound pod was not queued to be marked bound: left to reconcile")
