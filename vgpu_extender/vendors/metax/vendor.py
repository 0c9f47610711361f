"""MetaX's two backends as ``Vendor``s: whole cards (``Metax-GPU``, inventory from node
capacity) and sGPUs (``Metax-SGPU``, inventory from a node annotation)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, Vendor
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames
from vgpu_extender.vendors.metax import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.metax.config import MetaxConfig
from vgpu_extender.vendors.metax.share import METAX_GPU_SHARE, METAX_SGPU_SHARE
from vgpu_extender.vendors.metax.wording import METAX_WORDING


class MetaxGpuVendor(HamiVendor):
    """Whole MetaX cards. HAMi reads them from node capacity ``metax-tech.com/gpu``
    (``decode_capacity``, through ``devices_from_capacity``); ``decode_node`` reads no
    annotation; ``decode_inventory`` reads HAMi's registration JSON (a standalone
    inventory)."""

    def __init__(self, config: MetaxConfig | None = None) -> None:
        self._config = config or MetaxConfig()
        super().__init__(
            VendorNames(
                word=request.GPU_WORD,
                resources=frozenset({self._config.count_resource}),
                inventory=self._config.count_resource,
                capacity=(self._config.count_resource,),
                allocated=allocation_codec.GPU_ALLOCATED,
                to_allocate=allocation_codec.GPU_TO_ALLOCATE,
                node_lock=allocation_codec.GPU_NODE_LOCK,
            ),
            METAX_GPU_SHARE,
            METAX_WORDING,
            AdmissionNames(count=self._config.count_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_gpu_pod(pod, self._config)

    def devices_from_capacity(
        self, node_name: str, capacity: Mapping[str, str]
    ) -> tuple[Device, ...]:
        return inventory_codec.devices_from_capacity(
            node_name, capacity, self._config.count_resource
        )


class MetaxSgpuVendor(HamiVendor):
    """Shared MetaX sGPUs."""

    def __init__(self, config: MetaxConfig | None = None) -> None:
        self._config = config or MetaxConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=request.SGPU_WORD,
                resources=frozenset({cfg.sgpu_resource, cfg.vcore_resource, cfg.vmemory_resource}),
                inventory=inventory_codec.SGPU_ANNOTATION,
                allocated=allocation_codec.SGPU_ALLOCATED,
                to_allocate=allocation_codec.SGPU_TO_ALLOCATE,
                node_lock=allocation_codec.SGPU_NODE_LOCK,
            ),
            METAX_SGPU_SHARE,
            METAX_WORDING,
            AdmissionNames(count=cfg.sgpu_resource, memory=cfg.vmemory_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_sgpu_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return admission.container_admission(container, pod, self._config)

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        return inventory_codec.decode_sgpus(value)

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return inventory_codec.encode_sgpus(devices)

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        return allocation_codec.sgpu_annotations(containers, bind_time=bind_time)


def _are_vendors(gpu: MetaxGpuVendor, sgpu: MetaxSgpuVendor) -> tuple[Vendor, Vendor]:
    return gpu, sgpu  # mypy checks here that the classes are Vendors


def metax_vendors(settings: Mapping[str, Any]) -> tuple[MetaxGpuVendor, MetaxSgpuVendor]:
    """Both MetaX backends; ``ValueError`` naming the key and value for a bad setting."""
    config = MetaxConfig.from_mapping(settings)
    return MetaxGpuVendor(config), MetaxSgpuVendor(config)
