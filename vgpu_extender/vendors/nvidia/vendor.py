"""The NVIDIA vendor: HAMi's NVIDIA conventions behind the ``Vendor`` seam."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest, Wording
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.base import (
    AdmissionNames,
    ContainerAdmission,
    NodeFacts,
    NodeHandshake,
)
from vgpu_extender.vendors.nvidia import allocation_codec, inventory_codec, request
from vgpu_extender.vendors.nvidia.config import NvidiaConfig
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING


class NvidiaVendor:
    """Reads pods and HAMi annotations with the names of one ``NvidiaConfig``."""

    __slots__ = ("_config", "_resource_names")

    def __init__(self, config: NvidiaConfig | None = None) -> None:
        self._config = config or NvidiaConfig()
        self._resource_names = self._config.resource_names

    @property
    def config(self) -> NvidiaConfig:
        return self._config

    @property
    def name(self) -> str:
        return self._config.vendor_word

    @property
    def share(self) -> ShareModel:
        return NVIDIA_SHARE

    @property
    def wording(self) -> Wording:
        return NVIDIA_WORDING

    @property
    def admission(self) -> AdmissionNames:
        config = self._config
        return AdmissionNames(
            count=config.count_resource,
            memory=config.memory_resource,
            memory_percent=config.memory_percent_resource,
            cores=config.cores_resource,
            priority=config.priority_resource,
            exclusive_cores="100",
            # HAMi-core reads a container's priority from this variable.
            priority_env="CUDA_TASK_PRIORITY",
        )

    @property
    def resource_names(self) -> frozenset[str]:
        return self._resource_names

    @property
    def inventory_annotation(self) -> str:
        return self._config.register_annotation

    @property
    def node_keys(self) -> tuple[str, ...]:
        return (self._config.register_annotation,)

    @property
    def cordon_annotation(self) -> str:
        return self._config.cordon_annotation

    @property
    def node_annotation(self) -> str:
        return self._config.node_annotation

    @property
    def assignment_annotation(self) -> str:
        return self._config.allocated_annotation

    @property
    def handshake(self) -> NodeHandshake | None:
        return None  # HAMi's NVIDIA plugin registers without one

    def share_label(self, device: Device, memory_mib: int) -> str:
        return ""

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._config)

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        # HAMi's NVIDIA defaults are the webhook's, from ``admission``.
        return None

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        return inventory_codec.decode_inventory(value, vendor=self._config.vendor_word)

    @property
    def capacity_keys(self) -> tuple[str, ...]:
        return ()

    def decode_capacity(self, node: NodeFacts) -> tuple[Device, ...] | None:
        return None

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        value = node.annotations.get(self._config.register_annotation)
        return None if value is None else self.decode_inventory(value)

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return inventory_codec.encode_inventory(devices)

    def decode_cordon(self, value: str) -> frozenset[str]:
        return inventory_codec.decode_cordon(value)

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return allocation_codec.encode_assignment(assignment, vendor=self._config.vendor_word)

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        return allocation_codec.decode_assignment(value, init=init)

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        return allocation_codec.bind_annotations(
            assignment, bind_time=bind_time, config=self._config
        )
