"""Hygon DCUs as a ``Vendor`` (HAMi's CommonWord ``DCU``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, NodeHandshake, Vendor
from vgpu_extender.vendors.hami_handshake import RegisterHandshake
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames
from vgpu_extender.vendors.hygon import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.hygon.config import WORD, HygonConfig
from vgpu_extender.vendors.hygon.share import HYGON_SHARE
from vgpu_extender.vendors.hygon.wording import HYGON_WORDING


class HygonVendor(HamiVendor):
    def __init__(self, config: HygonConfig | None = None) -> None:
        self._config = config or HygonConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=WORD,
                resources=cfg.resources,
                inventory=inventory_codec.REGISTER_ANNOTATION,
                allocated=allocation_codec.ALLOCATED_ANNOTATION,
                to_allocate=allocation_codec.TO_ALLOCATE_ANNOTATION,
                node_lock=allocation_codec.NODE_LOCK,
                device_type=WORD,
            ),
            HYGON_SHARE,
            HYGON_WORDING,
            # No cores name: HAMi's webhook writes none for a bare count (the parse
            # reads absent cores as 100), and a written one would be a real resource ask.
            AdmissionNames(count=cfg.count_resource, memory=cfg.memory_resource),
        )
        self._handshake = RegisterHandshake(
            annotation=inventory_codec.HANDSHAKE_ANNOTATION,
            resource=cfg.count_resource,
            register=inventory_codec.REGISTER_ANNOTATION,
        )

    @property
    def config(self) -> HygonConfig:
        return self._config

    @property
    def handshake(self) -> NodeHandshake | None:
        return self._handshake

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, self._config.count_resource)

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        return inventory_codec.decode_inventory(value)

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return inventory_codec.encode_inventory(devices)


def _is_a_vendor(vendor: HygonVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def hygon_vendors(settings: Mapping[str, Any]) -> HygonVendor:
    """The vendor of HAMi's ``hygon:`` section; ``ValueError`` for a bad one."""
    return HygonVendor(HygonConfig.from_mapping(settings))
