"""Kubelet's ``Allocate``: hand one container its share of the GPUs the scheduler chose.

The scheduler wrote, per container, the GPUs and the memory and cores of each into
``hami.io/vgpu-devices-to-allocate``. For each call we find the pod being admitted,
take its first container still waiting, check kubelet asked for as many devices,
answer the HAMi-core environment and mounts, and write the rest of the annotation
back. After the last container the pod's bind phase becomes ``success`` and the node
lock is released; on any error the phase becomes ``failed``, the lock is released,
and kubelet gets an error that says what was wrong. Calls are serialized: two pods
admitted at once must never take each other's entries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import MODE_MIG
from device_plugins.errors import AllocationError
from device_plugins.hami_core import ContainerAllocation, HamiCoreConfig, build_allocation
from device_plugins.kube import KubeAccessError, KubeGateway
from device_plugins.nodelock import NodeLock, held_by, release_lock
from device_plugins.pending import PendingPod, PendingPodFinder
from device_plugins.pods import PodView
from device_plugins.replicas import ReplicaIdError, physical_uuid
from device_plugins.vendor import encode_containers, nvidia
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

log = logging.getLogger(__name__)

PHASE_SUCCESS = "success"
PHASE_FAILED = "failed"

Builder = Callable[..., ContainerAllocation]

__all__ = ["PHASE_FAILED", "PHASE_SUCCESS", "AllocationError", "PodAllocator"]


class PodAllocator:
    """Serves ``Allocate`` from the pods' annotations on one node."""

    def __init__(
        self,
        gateway: KubeGateway | None,
        *,
        node: str,
        state: DeviceState,
        hami: HamiCoreConfig,
        config: NvidiaConfig | None = None,
        builder: Builder = build_allocation,
    ) -> None:
        self._gateway = gateway
        self._node = node
        self._state = state
        self._hami = hami
        self._config = config or NvidiaConfig()
        self._vendor = nvidia(self._config)
        self._builder = builder
        self._lock = threading.Lock()

    def _finder(self) -> tuple[KubeGateway, PendingPodFinder]:
        if self._gateway is None:
            raise AllocationError(
                "this device plugin runs without Kubernetes access, so it cannot tell "
                "which pod is being admitted",
                code=AllocationError.UNAVAILABLE,
            )
        return self._gateway, PendingPodFinder(
            self._gateway, node=self._node, config=self._config, vendor=self._vendor
        )

    def preferred_uuids(self, size: int) -> Sequence[str]:
        """The GPUs of the next waiting container of that size; empty when unknown."""
        _, finder = self._finder()
        try:
            lookup = finder.find(size)
        except KubeAccessError as exc:
            raise AllocationError(str(exc), code=AllocationError.UNAVAILABLE) from exc
        pending = lookup.pending
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
                f"pod {pod.key} has no container left waiting for devices",
                code=AllocationError.FAILED,
            )
        grants = pending.segments[position]
        container = pod.containers[position].name if position < len(pod.containers) else ""
        if len(grants) != len(device_ids):
            raise AllocationError(
                f"device number not matched for pod {pod.key}: kubelet asked for "
                f"{len(device_ids)} device(s), container #{position} {container!r} was given "
                f"{len(grants)} ({', '.join(g.uuid for g in grants)})",
                code=AllocationError.INVALID,
            )
        self._check_devices(pod, device_ids, grants)
        env = pod.containers[position].env if position < len(pod.containers) else {}
        try:
            allocation = self._builder(
                grants,
                self._hami,
                pod_uid=pod.uid,
                container=container or str(position),
                container_env_vars=env,
            )
        except OSError as exc:
            raise AllocationError(
                f"cannot prepare the HAMi-core folders under {self._hami.vgpu_dir}: {exc}",
                code=AllocationError.FAILED,
            ) from exc
        self._write_back(gateway, pending, position)
        log.info("allocated %s to %s container %r", [g.uuid for g in grants], pod.key, container)
        return allocation

    def _check_devices(
        self, pod: PodView, device_ids: Sequence[str], grants: Sequence[DeviceGrant]
    ) -> None:
        devices = self._state.snapshot().by_uuid()
        for device_id in device_ids:
            try:
                uuid = physical_uuid(device_id)
            except ReplicaIdError as exc:
                raise AllocationError(str(exc), code=AllocationError.INVALID) from exc
            if uuid not in devices:
                raise AllocationError(
                    f"kubelet asked for device {device_id!r}, which is not on node {self._node}",
                    code=AllocationError.INVALID,
                )
        for grant in grants:
            device = devices.get(grant.uuid)
            if device is None:
                raise AllocationError(
                    f"pod {pod.key} was given GPU {grant.uuid}, which is not on node {self._node}",
                    code=AllocationError.INVALID,
                )
            if device.mode == MODE_MIG:
                raise AllocationError(
                    f"pod {pod.key} was given GPU {grant.uuid}, which is in MIG mode; "
                    "MIG partitions are not handed out by this plugin",
                    code=AllocationError.INVALID,
                )
            if not device.healthy:
                reason = self._state.failure_reason(grant.uuid) or "reported unhealthy"
                raise AllocationError(
                    f"pod {pod.key} was given GPU {grant.uuid}, which is unhealthy ({reason})",
                    code=AllocationError.UNAVAILABLE,
                )

    def _write_back(self, gateway: KubeGateway, pending: PendingPod, position: int) -> None:
        """Empty the served container's entry; after the last one, the pod is done."""
        pod = pending.pod
        remaining = tuple(
            () if index == position else grants for index, grants in enumerate(pending.segments)
        )
        patch: dict[str, str | None] = {
            self._config.to_allocate_annotation: encode_containers(
                self._vendor, remaining, node=self._node
            )
        }
        done = not any(remaining)
        if done:
            patch[self._config.bind_phase_annotation] = PHASE_SUCCESS
        try:
            gateway.patch_pod_annotations(pod.namespace, pod.name, patch)
        except KubeAccessError as exc:
            raise AllocationError(
                f"cannot write the remaining devices back to pod {pod.key}: {exc}",
                code=AllocationError.UNAVAILABLE,
            ) from exc
        if done:
            self._release(gateway, held_by(pod.namespace, pod.name))

    def _mark_failed(self, gateway: KubeGateway, pod: PodView, reason: str) -> None:
        log.error("pod %s: allocation failed: %s", pod.key, reason)
        changes: Mapping[str, str | None] = {self._config.bind_phase_annotation: PHASE_FAILED}
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
