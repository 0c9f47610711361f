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
    ContainerTurn,
)
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import MODE_MIG
from device_plugins.errors import AllocationError
from device_plugins.grant_checks import check_healthy, check_requested, preparing
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
        self._builder = builder

    def _count_mismatch(self, turn: ContainerTurn) -> str:
        return (
            f"device number not matched for pod {turn.pod.key}: kubelet asked for "
            f"{len(turn.device_ids)} device(s), container #{turn.position} "
            f"{turn.container!r} was given {len(turn.grants)} "
            f"({', '.join(g.uuid for g in turn.grants)})"
        )

    def _serve_container(self, turn: ContainerTurn) -> ContainerAllocation:
        pod, position = turn.pod, turn.position
        self._check_devices(pod, turn.device_ids, turn.grants)
        env = pod.containers[position].env if position < len(pod.containers) else {}
        with preparing(f"the HAMi-core folders under {self._hami.vgpu_dir}"):
            return self._builder(
                turn.grants,
                self._hami,
                pod_uid=pod.uid,
                container=turn.label,
                container_env_vars=env,
            )

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
