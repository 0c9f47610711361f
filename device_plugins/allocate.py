"""Kubelet's ``Allocate`` for NVIDIA: hand one container its share of the GPUs the scheduler chose.

The scheduler wrote, per container, the GPUs and the memory and cores of each into
``hami.io/vgpu-devices-to-allocate``. The shared flow (``allocation_flow``) finds the
pod, pops its first container still waiting and writes the rest back; here each GPU
granted is checked (on this node, not in MIG mode, healthy) and the container gets the
HAMi-core environment and mounts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from device_plugins.allocation_flow import (
    PHASE_FAILED,
    PHASE_SUCCESS,
    AllocationFlow,
    check_healthy,
    check_requested,
)
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import MODE_MIG
from device_plugins.errors import AllocationError
from device_plugins.hami_core import ContainerAllocation, HamiCoreConfig, build_allocation
from device_plugins.kube import KubeGateway
from device_plugins.pods import PodView
from device_plugins.vendor import nvidia
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

Builder = Callable[..., ContainerAllocation]

__all__ = ["PHASE_FAILED", "PHASE_SUCCESS", "AllocationError", "PodAllocator"]


class PodAllocator(AllocationFlow):
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
        config = config or NvidiaConfig()
        super().__init__(gateway, node=node, names=config, vendor=nvidia(config), unit="devices")
        self._state = state
        self._hami = hami
        self._config = config
        self._builder = builder

    def _count_mismatch(
        self,
        pod: PodView,
        position: int,
        container: str,
        device_ids: Sequence[str],
        grants: Sequence[DeviceGrant],
    ) -> str:
        return (
            f"device number not matched for pod {pod.key}: kubelet asked for "
            f"{len(device_ids)} device(s), container #{position} {container!r} was given "
            f"{len(grants)} ({', '.join(g.uuid for g in grants)})"
        )

    def _serve_container(
        self,
        pod: PodView,
        position: int,
        container: str,
        device_ids: Sequence[str],
        grants: Sequence[DeviceGrant],
    ) -> ContainerAllocation:
        self._check_devices(pod, device_ids, grants)
        env = pod.containers[position].env if position < len(pod.containers) else {}
        try:
            return self._builder(
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

    def _check_devices(
        self, pod: PodView, device_ids: Sequence[str], grants: Sequence[DeviceGrant]
    ) -> None:
        devices = self._state.snapshot().by_uuid()
        check_requested(device_ids, devices, self._node)
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
            check_healthy(self._state, device, pod, word="GPU")
