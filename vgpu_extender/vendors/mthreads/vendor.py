"""Moore Threads GPUs as a ``Vendor`` (HAMi's CommonWord ``Mthreads``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.base import AdmissionNames, ContainerAdmission, Vendor
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames
from vgpu_extender.vendors.mthreads import admission, allocation_codec, inventory_codec, request
from vgpu_extender.vendors.mthreads.config import WORD, MthreadsConfig
from vgpu_extender.vendors.mthreads.share import MTHREADS_SHARE
from vgpu_extender.vendors.mthreads.wording import MTHREADS_WORDING


class MthreadsVendor(HamiVendor):
    """Reads pods and writes HAMi's Moore Threads annotations. The inventory is the
    node's capacity, read through ``decode_capacity`` (``devices_from_capacity``);
    ``decode_node`` reads no annotation. No handshake, no node lock."""

    def __init__(self, config: MthreadsConfig | None = None) -> None:
        self._config = config or MthreadsConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=WORD,
                resources=cfg.resources,
                inventory=inventory_codec.INVENTORY_ANNOTATION,
                allocated=allocation_codec.ALLOCATED_ANNOTATION,
                device_type=WORD,
                capacity=(cfg.cores_resource, cfg.memory_resource),
            ),
            MTHREADS_SHARE,
            MTHREADS_WORDING,
            # No cores name: the webhook's own rule (admit) writes the whole-GPU limits.
            AdmissionNames(count=cfg.count_resource, memory=cfg.memory_resource),
        )

    @property
    def config(self) -> MthreadsConfig:
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
        return allocation_codec.side_annotations(
            containers, node=assignment.node, bind_time=bind_time
        )


def _is_a_vendor(vendor: MthreadsVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def mthreads_vendors(settings: Mapping[str, Any]) -> MthreadsVendor:
    """The vendor of HAMi's ``mthreads:`` section; ``ValueError`` for a bad one."""
    return MthreadsVendor(MthreadsConfig.from_mapping(settings))
