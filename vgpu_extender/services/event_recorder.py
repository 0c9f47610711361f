"""Pod Events about binds, posted by a worker thread so that a bind never waits for one.

An Event is a note for ``kubectl describe pod``: the bind's answer to kube-scheduler
does not depend on it, so it leaves the request path. The queue is bounded; when it
is full an Event is dropped and counted. Stopping lets the worker post what was
queued before, so a clean shutdown loses none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vgpu_extender.kube import EventType, KubeClient
from vgpu_extender.services.background import QueueWorker

#: How long stopping waits for the queued Events to go out.
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class _PodEvent:
    namespace: str
    pod: str
    uid: str
    reason: str
    message: str
    type: EventType


class EventRecorder:
    """``record`` queues an Event about a pod; the worker hands it to ``kube``."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        capacity: int = 1024,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        """``on_drop`` is called for each Event dropped because the queue was full."""
        self._kube = kube
        self._worker: QueueWorker[_PodEvent] = QueueWorker(
            self._post, name="vgpu-bind-events", capacity=capacity
        )
        if on_drop is not None:
            self._worker.on_drop = on_drop

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
        self._worker.submit(_PodEvent(namespace, pod, uid, reason, message, type))

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._worker.stop(STOP_TIMEOUT_S)

    def _post(self, event: _PodEvent) -> None:
        self._kube.create_event(
            namespace=event.namespace,
            pod=event.pod,
            uid=event.uid,
            reason=event.reason,
            message=event.message,
            type=event.type,
        )
