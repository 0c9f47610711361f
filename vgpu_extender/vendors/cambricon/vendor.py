"""Cambricon MLUs as a ``Vendor`` (HAMi's CommonWord ``MLU``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, Vendor
from vgpu_extender.vendors.cambricon import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.cambricon.config import WORD, CambriconConfig
from vgpu_extender.vendors.cambricon.lock import LOCK_ANNOTATION
from vgpu_extender.vendors.cambricon.share import CAMBRICON_SHARE
from vgpu_extender.vendors.cambricon.wording import CAMBRICON_WORDING
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames


class CambriconVendor(HamiVendor):
    """Reads pods and writes HAMi's Cambricon annotations. The inventory is the node's
    capacity, read through ``decode_capacity`` (``devices_from_capacity``);
    ``decode_node`` reads no annotation. HAMi's health check for MLUs always
    passes: there is no handshake."""

    def __init__(self, config: CambriconConfig | None = None) -> None:
        self._config = config or CambriconConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=WORD,
                resources=cfg.resources,
                inventory=inventory_codec.INVENTORY_ANNOTATION,
                allocated=allocation_codec.ALLOCATED_ANNOTATION,
                to_allocate=allocation_codec.TO_ALLOCATE_ANNOTATION,
                node_lock=LOCK_ANNOTATION,
                device_type=WORD,
                capacity=(cfg.cores_resource, cfg.memory_resource),
            ),
            CAMBRICON_SHARE,
            CAMBRICON_WORDING,
            # No cores name: HAMi's webhook writes none for a bare count (the parse
            # reads absent cores as 100), and a written one would be a real resource ask.
            AdmissionNames(count=cfg.count_resource, memory=cfg.memory_resource),
        )

    @property
    def config(self) -> CambriconConfig:
        return self._config

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, self._config)

    def devices_from_capacity(
        self, node_name: str, capacity: Mapping[str, str]
    ) -> tuple[Device, ...]:
        return inventory_codec.devices_from_capacity(node_name, capacity, self._config)

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        return allocation_codec.dsmlu_annotations(containers)


def _is_a_vendor(vendor: CambriconVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def cambricon_vendors(settings: Mapping[str, Any]) -> CambriconVendor:
    """The vendor of HAMi's ``cambricon:`` section; ``ValueError`` for a bad one."""
    return CambriconVendor(CambriconConfig.from_mapping(settings))
