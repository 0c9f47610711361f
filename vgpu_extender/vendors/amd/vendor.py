"""AMD as a ``Vendor``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import DeviceGrant, PodRequest
from vgpu_extender.vendors import hami_devices
from vgpu_extender.vendors.amd import allocation_codec, inventory_codec, request
from vgpu_extender.vendors.amd.config import AmdConfig
from vgpu_extender.vendors.amd.share import AMD_SHARE
from vgpu_extender.vendors.amd.wording import AMD_WORDING
from vgpu_extender.vendors.base import AdmissionNames, Vendor
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames, with_vendor


class AmdVendor(HamiVendor):
    def __init__(self, config: AmdConfig | None = None) -> None:
        self._config = config or AmdConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=request.WORD,
                resources=frozenset({cfg.count_resource, cfg.memory_resource, cfg.cores_resource}),
                inventory=inventory_codec.REGISTER_ANNOTATION,
                allocated=allocation_codec.ALLOCATED_ANNOTATION,
                to_allocate=allocation_codec.TO_ALLOCATE_ANNOTATION,
                node_lock=allocation_codec.NODE_LOCK,
                device_type="amd",
            ),
            AMD_SHARE,
            AMD_WORDING,
            AdmissionNames(count=cfg.count_resource, memory=cfg.memory_resource),
        )

    @property
    def config(self) -> AmdConfig:
        return self._config

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._config)

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        # The type field holds the product type: every entry under AMD's key is AMD's.
        return with_vendor(hami_devices.decode_containers(value, init=init), self.name)


def _is_a_vendor(vendor: AmdVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def amd_vendors(settings: Mapping[str, Any]) -> AmdVendor:
    """The AMD vendor; ``ValueError`` naming the key and value for a bad setting."""
    return AmdVendor(AmdConfig.from_mapping(settings))
