"""Kubelet's ``Allocate`` for an Ascend chip: hand one container the chips the scheduler chose.

The shared flow (``allocation_flow``: HAMi's ``GetPendingPod``, the pop, the write-back,
the bind phase and the node lock) runs under the chip's keys: the first container still
holding chips in ``hami.io/<CW>-devices-to-allocate`` is popped, and must hold as many
chips as kubelet asks for. ``huawei.com/<CW>`` gives each chip's template, memory and
cores, and ``huawei.com/vnpu-mode`` the sharing mode (``runtime``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from device_plugins.allocation_flow import AllocationFlow, ContainerTurn
from device_plugins.ascend.chips import NpuChip
from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.ascend.runtime import (
    CorePaths,
    RuntimeInfoError,
    container_answer,
    parse_runtime_entries,
    runtime_for,
)
from device_plugins.device_state import DeviceState
from device_plugins.errors import AllocationError
from device_plugins.grant_checks import check_healthy, check_requested, preparing
from device_plugins.hami_core import ContainerAllocation
from device_plugins.kube import KubeGateway
from device_plugins.pending import PendingPodFinder
from device_plugins.pods import PodView
from device_plugins.vendor import ascend_pod_names
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.ascend.allocation_codec import (
    HAMI_CORE,
    VNPU_MODE_ANNOTATION,
    runtime_annotation,
)


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


class AscendAllocator(AllocationFlow):
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
        super().__init__(
            gateway,
            node=node,
            names=ascend_pod_names(flavour.vendor),
            vendor=flavour.vendor,
            unit="NPUs",
        )
        self._state = state
        self._flavour = flavour
        self._chips = chips
        self._paths = paths

    def _new_finder(self, gateway: KubeGateway) -> PendingPodFinder:
        return ChipPodFinder(gateway, node=self._node, flavour=self._flavour)

    def _count_mismatch(self, turn: ContainerTurn) -> str:
        return (
            f"device number not matched: annotation has {len(turn.grants)}, request has "
            f"{len(turn.device_ids)} (pod {turn.pod.key}, container #{turn.position} "
            f"{turn.container!r})"
        )

    def _serve_container(self, turn: ContainerTurn) -> ContainerAllocation:
        pod = turn.pod
        chips = self._check_devices(pod, turn.device_ids, turn.grants)
        key = runtime_annotation(self._flavour.chip)
        value = pod.annotations.get(key)
        if value is None:
            raise AllocationError(
                f"pod {pod.key} has no annotation {key}", code=AllocationError.INVALID
            )
        try:
            runtime = runtime_for(turn.grants, parse_runtime_entries(value))
        except RuntimeInfoError as exc:
            raise AllocationError(
                f"pod {pod.key}: annotation {key}={value[:200]!r} is malformed: {exc}",
                code=AllocationError.INVALID,
            ) from exc
        hami_core = pod.annotations.get(VNPU_MODE_ANNOTATION) == HAMI_CORE
        with preparing(f"the HAMi-core folder under {self._paths.hook_path}"):
            return container_answer(
                turn.grants,
                chips,
                runtime,
                hami_core=hami_core,
                paths=self._paths,
                pod_uid=pod.uid,
                container=turn.label,
            )

    def _check_devices(
        self, pod: PodView, device_ids: Sequence[str], grants: Sequence[DeviceGrant]
    ) -> dict[str, NpuChip]:
        """The grants' chips; every ID kubelet sent and every grant must be a chip here."""
        devices = self._state.snapshot().by_uuid()
        chips = self._chips()
        check_requested(device_ids, devices, self._node)
        found: dict[str, NpuChip] = {}
        for grant in grants:
            device = devices.get(grant.uuid)
            chip = chips.get(grant.uuid)
            if device is None or chip is None:
                raise AllocationError(
                    f"pod {pod.key} was given NPU {grant.uuid}, which is not on node {self._node}",
                    code=AllocationError.INVALID,
                )
            check_healthy(self._state, device, pod, word="NPU")
            found[grant.uuid] = chip
        return found
