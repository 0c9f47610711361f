"""One Ascend chip as a ``Vendor``: HAMi registers each chip as its own device type,
keyed by its CommonWord (CW), so a configuration of seven chips is seven vendors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest, Wording
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.ascend import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.ascend.config import AscendConfig
from vgpu_extender.vendors.ascend.handshake import AscendHandshake
from vgpu_extender.vendors.ascend.share import ascend_share
from vgpu_extender.vendors.ascend.wording import ASCEND_WORDING
from vgpu_extender.vendors.base import (
    AdmissionNames,
    ContainerAdmission,
    NodeFacts,
    NodeHandshake,
    Vendor,
)


class AscendChipVendor:
    """Reads pods and HAMi's annotations for one chip of an ``AscendConfig``."""

    __slots__ = ("_chip", "_config", "_handshake", "_resource_names", "_share")

    def __init__(self, chip: ChipConfig, config: AscendConfig | None = None) -> None:
        self._chip = chip
        self._config = config or AscendConfig(chips=(chip,))
        self._share = ascend_share(chip)
        self._handshake = AscendHandshake(chip)
        self._resource_names = frozenset(
            name
            for name in (chip.resource_name, chip.resource_memory_name, chip.resource_core_name)
            if name
        )

    @property
    def chip(self) -> ChipConfig:
        return self._chip

    @property
    def config(self) -> AscendConfig:
        return self._config

    @property
    def name(self) -> str:
        return self._chip.common_word

    @property
    def share(self) -> ShareModel:
        return self._share

    @property
    def wording(self) -> Wording:
        return ASCEND_WORDING

    @property
    def admission(self) -> AdmissionNames:
        chip = self._chip
        return AdmissionNames(
            count=chip.resource_name,
            memory=chip.resource_memory_name,
            cores=chip.resource_core_name or None,
        )

    @property
    def resource_names(self) -> frozenset[str]:
        return self._resource_names

    @property
    def inventory_annotation(self) -> str:
        return inventory_codec.register_annotation(self._chip)

    @property
    def node_keys(self) -> tuple[str, ...]:
        return (self.inventory_annotation, inventory_codec.CORE_MODE_ANNOTATION)

    @property
    def cordon_annotation(self) -> str:
        # The NVIDIA vendor's hami.io/device-cordon, per chip.
        return f"hami.io/{self._chip.common_word}-device-cordon"

    @property
    def node_annotation(self) -> str:
        return allocation_codec.NODE_ANNOTATION

    @property
    def assignment_annotation(self) -> str:
        return allocation_codec.allocated_annotation(self._chip)

    def share_label(self, device: Device, memory_mib: int) -> str:
        # A template vNPU of a hard-split card; a whole card or a soft-split share has none.
        if device.mode != inventory_codec.MODE_VNPU or memory_mib <= 0:
            return ""
        memory, name = self._chip.trim_memory(memory_mib)
        return name if memory == memory_mib else ""

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._chip, self._config)

    @property
    def handshake(self) -> NodeHandshake | None:
        return self._handshake

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, pod, self._chip)

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        mode = inventory_codec.node_mode({}, default_core=self._config.hami_vnpu_core)
        return inventory_codec.decode_inventory(value, self._chip, mode=mode)

    @property
    def capacity_keys(self) -> tuple[str, ...]:
        return ()

    def decode_capacity(self, node: NodeFacts) -> tuple[Device, ...] | None:
        return None

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        value = node.annotations.get(self.inventory_annotation)
        if value is None:
            return None
        mode = inventory_codec.node_mode(node.annotations, default_core=self._config.hami_vnpu_core)
        return inventory_codec.decode_inventory(value, self._chip, mode=mode)

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return inventory_codec.encode_inventory(devices)

    def decode_cordon(self, value: str) -> frozenset[str]:
        if not isinstance(value, str):
            raise inventory_codec.InventoryError(
                f"cordon annotation must be a string, not {type(value).__name__}"
            )
        return frozenset(item.strip() for item in value.split(",") if item.strip())

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return allocation_codec.encode_assignment(assignment, self._chip)

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        return allocation_codec.decode_assignment(value, init=init)

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        return allocation_codec.bind_annotations(
            assignment, bind_time=bind_time, request=request, chip=self._chip
        )


def _is_a_vendor(vendor: AscendChipVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def ascend_vendors(settings: Mapping[str, Any]) -> tuple[AscendChipVendor, ...]:
    """One vendor per configured chip (the v2.10 chart's seven without ``vnpus``);
    ``ValueError`` naming the key and value for a bad setting."""
    config = AscendConfig.from_mapping(settings)
    return tuple(AscendChipVendor(chip, config) for chip in config.chips)
