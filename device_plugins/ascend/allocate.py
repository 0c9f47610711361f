"""Kubelet's ``Allocate`` for an Ascend chip: hand one container the chips the scheduler chose.

The pod is found as for NVIDIA (the node lock's pod, else the oldest waiting pod whose
next container asks for as many devices: HAMi's ``GetPendingPod``), but under the
chip's keys: its first container still holding chips in
``hami.io/<CW>-devices-to-allocate`` is popped, and must hold as many chips as kubelet
asks for. ``huawei.com/<CW>`` gives each chip's template, memory and cores, and
``huawei.com/vnpu-mode`` the sharing mode (``runtime``). The rest of the annotation is
written back; after the last container the bind phase is ``success`` and the node lock
is released; on any error the phase is ``failed`` and the lock released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from device_plugins.ascend.chips import NpuChip
from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.ascend.runtime import (
    CorePaths,
    RuntimeInfoError,
    container_answer,
    parse_runtime_info,
)
from device_plugins.device_state import DeviceState
from device_plugins.errors import AllocationError
from device_plugins.hami_core import ContainerAllocation
from device_plugins.kube import KubeAccessError, KubeGateway
from device_plugins.nodelock import NodeLock, held_by, release_lock
from device_plugins.pending import PendingPod, PendingPodFinder
from device_plugins.pods import PodView
from device_plugins.replicas import ReplicaIdError, physical_uuid
from device_plugins.vendor import ascend_pod_names, encode_containers
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.ascend.allocation_codec import (
    HAMI_CORE,
    VNPU_MODE_ANNOTATION,
    runtime_annotation,
)

log = logging.getLogger(__name__)

PHASE_SUCCESS = "success"
PHASE_FAILED = "failed"


class ChipPodFinder(PendingPodFinder):
    """HAMi's pending-pod rule, among the pods that were given this chip: a pod bound
    with another vendor's devices only is not waiting for this plugin (and must not be
    failed as unreadable by it)."""

    def __init__(self, gateway: KubeGateway, *, node: str, flavour: AscendFlavour) -> None:
        names = ascend_pod_names(flavour.vendor)
        super().__init__(gateway, node=node, config=names, vendor=flavour.vendor)
        self._key = names.to_allocate_annotation

    def is_waiting(self, pod: PodView) -> bool:
        return self._key in pod.annotations and super().is_waiting(pod)


class AscendAllocator:
    """Serves ``Allocate`` (and ``GetPreferredAllocation``) for one chip on one node."""

    def __init__(
        self,
        gateway: KubeGateway | None,
        *,
        node: str,
        state: DeviceState,
        flavour: AscendFlavour,
        chips: Callable[[], Mapping[str, NpuChip]],
        paths: CorePaths,
    ) -> None:
        self._gateway = gateway
        self._node = node
        self._state = state
        self._flavour = flavour
        self._chips = chips
        self._paths = paths
        self._names = ascend_pod_names(flavour.vendor)
        self._lock = threading.Lock()

    def _finder(self) -> tuple[KubeGateway, PendingPodFinder]:
        if self._gateway is None:
            raise AllocationError(
                "this device plugin runs without Kubernetes access, so it cannot tell "
                "which pod is being admitted",
                code=AllocationError.UNAVAILABLE,
            )
        return self._gateway, ChipPodFinder(self._gateway, node=self._node, flavour=self._flavour)

    def preferred_uuids(self, size: int) -> Sequence[str]:
        """The chips of the next waiting container of that size; empty when unknown."""
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
                f"pod {pod.key} has no container left waiting for NPUs",
                code=AllocationError.FAILED,
            )
        grants = pending.segments[position]
        container = pod.containers[position].name if position < len(pod.containers) else ""
        if len(grants) != len(device_ids):
            raise AllocationError(
                f"device number not matched: annotation has {len(grants)}, request has "
                f"{len(device_ids)} (pod {pod.key}, container #{position} {container!r})",
                code=AllocationError.INVALID,
            )
        chips = self._check_devices(pod, device_ids, grants)
        key = runtime_annotation(self._flavour.chip)
        value = pod.annotations.get(key)
        if value is None:
            raise AllocationError(
                f"pod {pod.key} has no annotation {key}", code=AllocationError.INVALID
            )
        try:
            runtime = parse_runtime_info(value)
        except RuntimeInfoError as exc:
            raise AllocationError(
                f"pod {pod.key}: annotation {key}={value[:200]!r} is malformed: {exc}",
                code=AllocationError.INVALID,
            ) from exc
        hami_core = pod.annotations.get(VNPU_MODE_ANNOTATION) == HAMI_CORE
        try:
            answer = container_answer(
                grants,
                chips,
                runtime,
                hami_core=hami_core,
                paths=self._paths,
                pod_uid=pod.uid,
                container=container or str(position),
            )
        except OSError as exc:
            raise AllocationError(
                f"cannot prepare the HAMi-core folder under {self._paths.hook_path}: {exc}",
                code=AllocationError.FAILED,
            ) from exc
        self._write_back(gateway, pending, position)
        log.info("allocated %s to %s container %r", [g.uuid for g in grants], pod.key, container)
        return answer

    def _check_devices(
        self, pod: PodView, device_ids: Sequence[str], grants: Sequence[DeviceGrant]
    ) -> dict[str, NpuChip]:
        """The grants' chips; every ID kubelet sent and every grant must be a chip here."""
        devices = self._state.snapshot().by_uuid()
        chips = self._chips()
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
        found: dict[str, NpuChip] = {}
        for grant in grants:
            device = devices.get(grant.uuid)
            chip = chips.get(grant.uuid)
            if device is None or chip is None:
                raise AllocationError(
                    f"pod {pod.key} was given NPU {grant.uuid}, which is not on node {self._node}",
                    code=AllocationError.INVALID,
                )
            if not device.healthy:
                reason = self._state.failure_reason(grant.uuid) or "reported unhealthy"
                raise AllocationError(
                    f"pod {pod.key} was given NPU {grant.uuid}, which is unhealthy ({reason})",
                    code=AllocationError.UNAVAILABLE,
                )
            found[grant.uuid] = chip
        return found

    def _write_back(self, gateway: KubeGateway, pending: PendingPod, position: int) -> None:
        """Empty the served container's entry; after the last one, the pod is done."""
        pod = pending.pod
        remaining = tuple(
            () if index == position else grants for index, grants in enumerate(pending.segments)
        )
        patch: dict[str, str | None] = {
            self._names.to_allocate_annotation: encode_containers(
                self._flavour.vendor, remaining, node=self._node
            )
        }
        done = not any(remaining)
        if done:
            patch[self._names.bind_phase_annotation] = PHASE_SUCCESS
        try:
            gateway.patch_pod_annotations(pod.namespace, pod.name, patch)
        except KubeAccessError as exc:
            raise AllocationError(
                f"cannot write the remaining NPUs back to pod {pod.key}: {exc}",
                code=AllocationError.UNAVAILABLE,
            ) from exc
        if done:
            self._release(gateway, held_by(pod.namespace, pod.name))

    def _mark_failed(self, gateway: KubeGateway, pod: PodView, reason: str) -> None:
        log.error("pod %s: allocation failed: %s", pod.key, reason)
        try:
            gateway.patch_pod_annotations(
                pod.namespace, pod.name, {self._names.bind_phase_annotation: PHASE_FAILED}
            )
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
