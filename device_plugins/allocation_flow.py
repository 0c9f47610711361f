"""HAMi's ``Allocate`` flow, written once for every chip the agent serves.

Kubelet names devices, not pods, so each call finds the pod being admitted (the
node lock's pod, else the oldest waiting one whose next container asks for as many
devices), takes its first container still holding devices, checks kubelet asked for
as many, lets the chip answer, and writes the rest of the annotation back. After
the last container the pod's bind phase becomes ``success`` and the node lock is
released; on any error the phase becomes ``failed``, the lock is released, and
kubelet gets an error that says what was wrong. Calls are serialized: two pods
admitted at once must never take each other's entries. A chip says only what
differs: how it checks and answers one container, and the words of its errors.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from device_plugins.errors import AllocationError
from device_plugins.hami_core import ContainerAllocation
from device_plugins.kube import KubeAccessError, KubeGateway
from device_plugins.nodelock import NodeLock, held_by, release_lock
from device_plugins.pending import PendingPod, PendingPodFinder
from device_plugins.pods import PodView
from device_plugins.vendor import encode_containers
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.base import Vendor
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

log = logging.getLogger(__name__)

PHASE_SUCCESS = "success"
PHASE_FAILED = "failed"

__all__ = ["PHASE_FAILED", "PHASE_SUCCESS", "AllocationFlow", "ContainerTurn"]


@dataclass(frozen=True, slots=True)
class ContainerTurn:
    """The container being served: the pod, its index and name ("" when the pod spec
    lists fewer containers), the IDs kubelet sent and the scheduler's grants."""

    pod: PodView
    position: int
    container: str
    device_ids: Sequence[str]
    grants: Sequence[DeviceGrant]

    @property
    def label(self) -> str:
        """The container's name in HAMi-core's folders: its index when it has none."""
        return self.container or str(self.position)


class AllocationFlow(ABC):
    """Serves ``Allocate`` (and ``GetPreferredAllocation``) from the pods' annotations.

    ``names`` holds the pod annotation names (``to-allocate``, bind phase) and
    ``vendor`` the codec that writes the remaining containers back; ``unit`` is the
    word kubelet reads for what is handed out ("devices", "NPUs").
    """

    def __init__(
        self,
        gateway: KubeGateway | None,
        *,
        node: str,
        names: NvidiaConfig,
        vendor: Vendor,
        unit: str,
    ) -> None:
        self._gateway = gateway
        self._node = node
        self._names = names
        self._vendor = vendor
        self._unit = unit
        self._lock = threading.Lock()

    @abstractmethod
    def _serve_container(self, turn: ContainerTurn) -> ContainerAllocation:
        """Check kubelet's IDs and the grants on this node, and answer the container."""

    @abstractmethod
    def _count_mismatch(self, turn: ContainerTurn) -> str:
        """What kubelet is told when it asks for another number of devices."""

    def _new_finder(self, gateway: KubeGateway) -> PendingPodFinder:
        return PendingPodFinder(gateway, node=self._node, config=self._names, vendor=self._vendor)

    def _finder(self) -> tuple[KubeGateway, PendingPodFinder]:
        if self._gateway is None:
            raise AllocationError(
                "this device plugin runs without Kubernetes access, so it cannot tell "
                "which pod is being admitted",
                code=AllocationError.UNAVAILABLE,
            )
        return self._gateway, self._new_finder(self._gateway)

    def preferred_uuids(self, size: int) -> Sequence[str]:
        """The devices of the next waiting container of that size; empty when unknown."""
        _, finder = self._finder()
        try:
            pending = finder.find(size).pending
        except KubeAccessError as exc:
            raise AllocationError(str(exc), code=AllocationError.UNAVAILABLE) from exc
        position = None if pending is None or pending.error else pending.next_position
        if pending is None or position is None or len(pending.segments[position]) != size:
            return ()
        return [grant.uuid for grant in pending.segments[position]]

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        gateway, finder = self._finder()
        if not device_ids:
            raise AllocationError("kubelet asked for no devices", code=AllocationError.INVALID)
        with self._lock:
            try:
                lookup = finder.find(len(device_ids))
            except KubeAccessError as exc:
                raise AllocationError(
                    f"cannot look up the pod being admitted: {exc}",
                    code=AllocationError.UNAVAILABLE,
                ) from exc
            for broken in lookup.broken:
                if broken is not lookup.pending:
                    self._mark_failed(gateway, broken.pod, broken.error)
            if lookup.pending is None:
                self._release_seen_lock(gateway, lookup.lock)
                raise AllocationError(lookup.problem, code=AllocationError.NOT_FOUND)
            try:
                return self._serve(gateway, lookup.pending, device_ids)
            except AllocationError as exc:
                self._mark_failed(gateway, lookup.pending.pod, str(exc))
                raise
            except Exception as exc:
                # A bug must not leave the pod waiting forever with the node locked.
                log.exception("unexpected error while allocating")
                message = f"internal error while allocating: {exc!r}"
                self._mark_failed(gateway, lookup.pending.pod, message)
                raise AllocationError(message, code=AllocationError.FAILED) from exc

    def _serve(
        self, gateway: KubeGateway, pending: PendingPod, device_ids: Sequence[str]
    ) -> ContainerAllocation:
        pod = pending.pod
        if pending.error:
            raise AllocationError(f"pod {pod.key}: {pending.error}", code=AllocationError.INVALID)
        position = pending.next_position
        if position is None:
            raise AllocationError(
                f"pod {pod.key} has no container left waiting for {self._unit}",
                code=AllocationError.FAILED,
            )
        grants = pending.segments[position]
        container = pod.containers[position].name if position < len(pod.containers) else ""
        turn = ContainerTurn(pod, position, container, device_ids, grants)
        if len(grants) != len(device_ids):
            raise AllocationError(self._count_mismatch(turn), code=AllocationError.INVALID)
        answer = self._serve_container(turn)
        self._write_back(gateway, pending, position)
        log.info("allocated %s to %s container %r", [g.uuid for g in grants], pod.key, container)
        return answer

    def _write_back(self, gateway: KubeGateway, pending: PendingPod, position: int) -> None:
        """Empty the served container's entry; after the last one, the pod is done."""
        pod = pending.pod
        remaining = tuple(
            () if index == position else grants for index, grants in enumerate(pending.segments)
        )
        patch: dict[str, str | None] = {
            self._names.to_allocate_annotation: encode_containers(
                self._vendor, remaining, node=self._node
            )
        }
        done = not any(remaining)
        if done:
            patch[self._names.bind_phase_annotation] = PHASE_SUCCESS
        try:
            gateway.patch_pod_annotations(pod.namespace, pod.name, patch)
        except KubeAccessError as exc:
            raise AllocationError(
                f"cannot write the remaining {self._unit} back to pod {pod.key}: {exc}",
                code=AllocationError.UNAVAILABLE,
            ) from exc
        if done:
            self._release(gateway, held_by(pod.namespace, pod.name))

    def _mark_failed(self, gateway: KubeGateway, pod: PodView, reason: str) -> None:
        log.error("pod %s: allocation failed: %s", pod.key, reason)
        changes: Mapping[str, str | None] = {self._names.bind_phase_annotation: PHASE_FAILED}
        try:
            gateway.patch_pod_annotations(pod.namespace, pod.name, changes)
        except KubeAccessError as exc:
            log.error("cannot mark pod %s failed: %s", pod.key, exc)
        self._release(gateway, held_by(pod.namespace, pod.name))

    def _release_seen_lock(self, gateway: KubeGateway, lock: NodeLock | None) -> None:
        """No pod matched: the lock we saw names nobody waiting, so it is stale."""
        if lock is not None:
            self._release(gateway, lambda current: current == lock)

    def _release(self, gateway: KubeGateway, matches: Callable[[NodeLock], bool]) -> None:
        try:
            release_lock(gateway, self._node, matches)
        except KubeAccessError as exc:
            log.error("cannot release the node lock of %s: %s", self._node, exc)
