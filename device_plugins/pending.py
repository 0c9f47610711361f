"""Which pod is kubelet admitting? Kubelet's ``Allocate`` names devices, not pods.

HAMi's answer: the pod named by the node lock (``hami.io/mutex.lock``) when there is
one; otherwise a Pending pod on this node whose bind phase is ``allocating``. Among
those we take the oldest (by bind time, then creation) whose next container asks
for as many devices as kubelet sends, so two pods bound close together are not
confused when their containers differ in size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from device_plugins.kube import KubeGateway
from device_plugins.nodelock import NodeLock, current_lock
from device_plugins.pods import PodFormatError, PodView, pod_view
from device_plugins.vendor import BIND_PHASE_ALLOCATING, nvidia
from vgpu_extender.domain import AnnotationError, DeviceGrant
from vgpu_extender.vendors.base import Vendor
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

log = logging.getLogger(__name__)

_NEVER = 2**63
#: Bind phases of a pod whose devices may still be waiting (HAMi's GetPendingPod).
_WAITING_PHASES = frozenset({BIND_PHASE_ALLOCATING, "success"})


@dataclass(frozen=True, slots=True)
class PendingPod:
    """A pod waiting for its devices, with its remaining container segments decoded.

    ``error`` is set (and ``segments`` empty) when its annotation cannot be decoded.
    """

    pod: PodView
    segments: tuple[tuple[DeviceGrant, ...], ...] = ()
    error: str = ""

    @property
    def next_position(self) -> int | None:
        """Index of the first container still holding devices."""
        for position, grants in enumerate(self.segments):
            if grants:
                return position
        return None

    @property
    def next_count(self) -> int | None:
        position = self.next_position
        return None if position is None else len(self.segments[position])


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the search found.

    ``pending`` is the pod (None with ``problem`` saying why); ``lock`` the node lock
    seen; ``broken`` waiting pods whose annotation cannot be decoded: they can never
    be served, so the allocator marks them failed whoever kubelet is admitting.
    """

    pending: PendingPod | None
    lock: NodeLock | None
    by_lock: bool = False
    broken: tuple[PendingPod, ...] = ()
    problem: str = ""


class PendingPodFinder:
    def __init__(
        self,
        gateway: KubeGateway,
        *,
        node: str,
        config: NvidiaConfig,
        vendor: Vendor | None = None,
    ) -> None:
        self._gateway = gateway
        self._node = node
        self._config = config
        self._vendor = vendor or nvidia(config)

    def decode(self, pod: PodView) -> PendingPod:
        value = pod.annotations.get(self._config.to_allocate_annotation)
        if value is None:
            return PendingPod(
                pod, error=f"annotation {self._config.to_allocate_annotation} is missing"
            )
        init = tuple(container.init for container in pod.containers)
        try:
            return PendingPod(pod, self._vendor.decode_assignment(value, init=init))
        except AnnotationError as exc:
            key = self._config.to_allocate_annotation
            return PendingPod(pod, error=f"annotation {key}={value!r} is malformed: {exc}")

    def is_waiting(self, pod: PodView) -> bool:
        """Pending on this node, bound by the scheduler with devices of this agent's
        vendor (its to-allocate annotation), not all handed out yet. The phase may read
        ``success`` already, as HAMi's lookup allows: on a pod with devices of two
        vendors, the other vendor's agent may have finished first."""
        annotations = pod.annotations
        return (
            pod.phase in ("Pending", "")
            and (not pod.node_name or pod.node_name == self._node)
            and annotations.get(self._config.node_annotation) == self._node
            and annotations.get(self._config.bind_phase_annotation) in _WAITING_PHASES
            and bool(annotations.get(self._config.bind_time_annotation))
            and self._config.to_allocate_annotation in annotations
        )

    def _bind_time(self, pod: PodView) -> int:
        try:
            return int(pod.annotations.get(self._config.bind_time_annotation, ""))
        except ValueError:
            return _NEVER

    def find(self, count: int) -> Lookup:
        """The pod whose next container gets ``count`` devices, or why there is none."""
        lock = current_lock(self._gateway, self._node)
        if lock is not None and lock.names_pod:
            obj = self._gateway.get_pod(lock.namespace, lock.pod)
            pod = self._view(obj) if obj is not None else None
            if pod is not None and self.is_waiting(pod):
                return Lookup(self.decode(pod), lock, by_lock=True)
            log.info(
                "node lock names %s/%s, which is not waiting; searching", lock.namespace, lock.pod
            )
        candidates = [self.decode(pod) for pod in self._waiting_pods()]
        broken = tuple(c for c in candidates if c.error)
        for candidate in candidates:
            if not candidate.error and candidate.next_count == count:
                return Lookup(candidate, lock, broken=broken)
        if not candidates:
            problem = (
                f"no pending pod on node {self._node} is waiting for devices "
                f"({self._config.bind_phase_annotation}={BIND_PHASE_ALLOCATING})"
            )
        else:
            seen = "; ".join(
                f"{c.pod.key}: {c.error}" if c.error else f"{c.pod.key} wants {c.next_count or 0}"
                for c in candidates
            )
            problem = (
                f"device number not matched: kubelet asked for {count} device(s) and no "
                f"pending pod on node {self._node} has a container waiting for that many ({seen})"
            )
        return Lookup(None, lock, broken=broken, problem=problem)

    def _view(self, obj: dict[str, object]) -> PodView | None:
        try:
            return pod_view(obj)
        except PodFormatError as exc:
            log.warning("skipping a pod that cannot be read: %s", exc)
            return None

    def _waiting_pods(self) -> list[PodView]:
        views = [self._view(obj) for obj in self._gateway.pods_on_node(self._node)]
        waiting = [pod for pod in views if pod is not None and self.is_waiting(pod)]
        return sorted(waiting, key=lambda pod: (self._bind_time(pod), pod.created, pod.key))
