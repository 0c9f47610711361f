"""Enflame's two backends as ``Vendor``s. Both inventories carry the node's name in
their device IDs: ``GCU`` reads the node's capacity (``gcus_from_capacity``), DRS its
``enflame.com/gcu-drs-capacity`` annotation (``drs_devices``). ``decode_inventory``
reads HAMi's registration JSON (a standalone inventory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, NodeFacts, Vendor
from vgpu_extender.vendors.enflame import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.enflame.config import EnflameConfig
from vgpu_extender.vendors.enflame.share import DRS_SHARE, GCU_SHARE
from vgpu_extender.vendors.enflame.wording import ENFLAME_WORDING
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames


class GcuVendor(HamiVendor):
    """Whole Enflame GCUs (``enflame.com/gcu``)."""

    def __init__(self, config: EnflameConfig | None = None) -> None:
        self._config = config or EnflameConfig()
        super().__init__(
            VendorNames(
                word=request.GCU_WORD,
                resources=frozenset({self._config.gcu_resource}),
                inventory=self._config.gcu_resource,
                capacity=(self._config.gcu_resource,),
                allocated=allocation_codec.GCU_ALLOCATED,
                to_allocate=allocation_codec.GCU_TO_ALLOCATE,
                node_lock=allocation_codec.NODE_LOCK,
            ),
            GCU_SHARE,
            ENFLAME_WORDING,
            AdmissionNames(count=self._config.gcu_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_gcu_pod(pod, self._config)

    def devices_from_capacity(
        self, node_name: str, capacity: Mapping[str, str]
    ) -> tuple[Device, ...]:
        return inventory_codec.gcus_from_capacity(node_name, capacity, self._config.gcu_resource)


class EnflameDrsVendor(HamiVendor):
    """Enflame DRS partitions (``enflame.com/drs-gcu``, or memory and core asks)."""

    def __init__(self, config: EnflameConfig | None = None) -> None:
        self._config = config or EnflameConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=request.DRS_WORD,
                resources=frozenset({cfg.drs_resource, cfg.memory_resource, cfg.core_resource}),
                inventory=inventory_codec.DRS_ANNOTATION,
                allocated=allocation_codec.DRS_ALLOCATED,
                node_lock=allocation_codec.NODE_LOCK,
            ),
            DRS_SHARE,
            ENFLAME_WORDING,
            AdmissionNames(count=cfg.drs_resource, memory=cfg.memory_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_drs_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, self._config)

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        value = node.annotations.get(inventory_codec.DRS_ANNOTATION)
        return None if value is None else inventory_codec.drs_devices(node.name, value)

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        return allocation_codec.drs_annotations(
            containers, bind_time=bind_time, request=request, profiles=self._config.profiles
        )


def _are_vendors(gcu: GcuVendor, drs: EnflameDrsVendor) -> tuple[Vendor, Vendor]:
    return gcu, drs  # mypy checks here that the classes are Vendors


def enflame_vendors(settings: Mapping[str, Any]) -> tuple[GcuVendor, EnflameDrsVendor]:
    """Both Enflame backends; ``ValueError`` naming the key and value for a bad setting."""
    config = EnflameConfig.from_mapping(settings)
    return GcuVendor(config), EnflameDrsVendor(config)
