"""One Iluvatar chip as a ``Vendor``: HAMi registers each chip of ``iluvatars:`` as its
own device type, keyed by its CommonWord."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, PodRequest
from vgpu_extender.vendors import hami_node_csv
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, NodeHandshake, Vendor
from vgpu_extender.vendors.hami_handshake import RegisterHandshake
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames
from vgpu_extender.vendors.iluvatar import admission, codecs, request
from vgpu_extender.vendors.iluvatar.config import IluvatarChip, IluvatarConfig
from vgpu_extender.vendors.iluvatar.share import iluvatar_share
from vgpu_extender.vendors.iluvatar.wording import ILUVATAR_WORDING


class IluvatarChipVendor(HamiVendor):
    def __init__(self, chip: IluvatarChip) -> None:
        self._chip = chip
        super().__init__(
            VendorNames(
                word=chip.common_word,
                resources=chip.resources,
                inventory=codecs.register_annotation(chip),
                allocated=codecs.allocated_annotation(chip),
                to_allocate=codecs.to_allocate_annotation(chip),
                node_lock=codecs.NODE_LOCK,
                device_type=chip.common_word,
            ),
            iluvatar_share(chip),
            ILUVATAR_WORDING,
            AdmissionNames(
                count=chip.count_resource,
                memory=chip.memory_resource,
                cores=chip.cores_resource,
            ),
        )
        self._handshake = RegisterHandshake(
            annotation=codecs.handshake_annotation(chip),
            resource=chip.count_resource,
            register=codecs.register_annotation(chip),
        )

    @property
    def chip(self) -> IluvatarChip:
        return self._chip

    @property
    def handshake(self) -> NodeHandshake | None:
        return self._handshake

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._chip)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, self._chip)

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        return hami_node_csv.decode_devices(value, vendor=self.name)

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return hami_node_csv.encode_devices(devices)


def _is_a_vendor(vendor: IluvatarChipVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def iluvatar_vendors(settings: Mapping[str, Any]) -> tuple[IluvatarChipVendor, ...]:
    """One vendor per configured chip (HAMi's four without ``iluvatars``); ``ValueError``
    naming the key and value for a bad setting."""
    return tuple(IluvatarChipVendor(chip) for chip in IluvatarConfig.from_mapping(settings).chips)
