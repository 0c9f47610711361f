"""Kunlunxin's two backends as ``Vendor``s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, NodeHandshake, Vendor
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames
from vgpu_extender.vendors.kunlun import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.kunlun.config import KunlunConfig
from vgpu_extender.vendors.kunlun.handshake import vxpu_handshake
from vgpu_extender.vendors.kunlun.share import VXPU_SHARE, WHOLE_SHARE
from vgpu_extender.vendors.kunlun.wording import KUNLUN_WORDING


class KunlunVendor(HamiVendor):
    """Whole P800 XPUs. HAMi reads them from node capacity ``kunlunxin.com/xpu``
    (``decode_capacity``, through ``xpus_from_capacity``; ``decode_node`` reads no
    annotation); ``decode_inventory`` reads HAMi's registration JSON (a standalone inventory)."""

    def __init__(self, config: KunlunConfig | None = None) -> None:
        self._config = config or KunlunConfig()
        super().__init__(
            VendorNames(
                word=request.WHOLE_WORD,
                resources=frozenset({self._config.count_resource}),
                inventory=self._config.count_resource,
                capacity=(self._config.count_resource,),
                allocated=allocation_codec.WHOLE_ALLOCATED,
                node_lock=allocation_codec.WHOLE_NODE_LOCK,
            ),
            WHOLE_SHARE,
            KUNLUN_WORDING,
            AdmissionNames(count=self._config.count_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_whole_pod(pod, self._config)

    def devices_from_capacity(
        self, node_name: str, capacity: Mapping[str, str]
    ) -> tuple[Device, ...]:
        return inventory_codec.xpus_from_capacity(node_name, capacity, self._config.count_resource)

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        return allocation_codec.device_idx(containers)


class VxpuVendor(HamiVendor):
    """Kunlunxin vXPUs (quarter, half or whole cards)."""

    def __init__(self, config: KunlunConfig | None = None) -> None:
        self._config = config or KunlunConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=request.VXPU_WORD,
                resources=frozenset({cfg.vcount_resource, cfg.vmemory_resource}),
                inventory=inventory_codec.REGISTER_ANNOTATION,
                allocated=allocation_codec.VXPU_ALLOCATED,
                to_allocate=allocation_codec.VXPU_TO_ALLOCATE,
                node_lock=allocation_codec.VXPU_NODE_LOCK,
            ),
            VXPU_SHARE,
            KUNLUN_WORDING,
            AdmissionNames(count=cfg.vcount_resource, memory=cfg.vmemory_resource),
        )
        self._handshake = vxpu_handshake(cfg.vcount_resource)

    @property
    def handshake(self) -> NodeHandshake | None:
        return self._handshake

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_vxpu_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, self._config)


def _are_vendors(whole: KunlunVendor, vxpu: VxpuVendor) -> tuple[Vendor, Vendor]:
    return whole, vxpu  # mypy checks here that the classes are Vendors


def kunlun_vendors(settings: Mapping[str, Any]) -> tuple[KunlunVendor, VxpuVendor]:
    """Both Kunlunxin backends; ``ValueError`` naming the key and value for a bad setting."""
    config = KunlunConfig.from_mapping(settings)
    return KunlunVendor(config), VxpuVendor(config)
