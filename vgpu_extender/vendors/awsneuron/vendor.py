"""AWS Neuron as a ``Vendor``. HAMi reads its devices from node capacity and the node's
instance-type label (``decode_capacity``; ``decode_node`` reads no annotation);
``decode_inventory`` reads HAMi's registration JSON (a standalone inventory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors.awsneuron import allocation_codec, inventory_codec, request
from vgpu_extender.vendors.awsneuron.config import CORES_PER_DEVICE, NeuronConfig
from vgpu_extender.vendors.awsneuron.share import NEURON_SHARE
from vgpu_extender.vendors.awsneuron.wording import NEURON_WORDING
from vgpu_extender.vendors.base import AdmissionNames, NodeFacts, Vendor
from vgpu_extender.vendors.hami_vendor import HamiVendor, VendorNames, chip_containers


class NeuronVendor(HamiVendor):
    def __init__(self, config: NeuronConfig | None = None) -> None:
        self._config = config or NeuronConfig()
        cfg = self._config
        super().__init__(
            VendorNames(
                word=request.WORD,
                resources=frozenset({cfg.count_resource, cfg.core_resource}),
                inventory=cfg.count_resource,
                capacity=(cfg.count_resource, cfg.core_resource),
                allocated=allocation_codec.ALLOCATED,
                node_lock=allocation_codec.NODE_LOCK,
            ),
            NEURON_SHARE,
            NEURON_WORDING,
            AdmissionNames(count=cfg.count_resource),
        )

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        return request.parse_pod(pod, self._config)

    def devices_of(self, node: NodeFacts) -> tuple[Device, ...]:
        return self.devices_from_capacity(node.name, node.capacity, node.labels)

    def devices_from_capacity(
        self,
        node_name: str,
        capacity: Mapping[str, str],
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Device, ...]:
        """``labels``: the node's, for its instance type (none: the devices are read as
        wired in aligned groups, not a ring)."""
        return inventory_codec.devices_from_capacity(
            node_name,
            capacity,
            labels or {},
            count_resource=self._config.count_resource,
            core_resource=self._config.core_resource,
        )

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return allocation_codec.encode(chip_containers(assignment, self.name), vendor=self.name)

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        return allocation_codec.decode(value, init=init)

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        return allocation_codec.side_annotations(
            containers,
            node=assignment.node,
            bind_time=bind_time,
            request=request,
            cores_per_device=CORES_PER_DEVICE,
            core_resource=self._config.core_resource,
            vendor=self.name,
        )


def _is_a_vendor(vendor: NeuronVendor) -> Vendor:
    return vendor  # mypy checks here that the class is a Vendor


def awsneuron_vendors(settings: Mapping[str, Any]) -> NeuronVendor:
    """The AWS Neuron vendor; ``ValueError`` naming the key and value for a bad setting."""
    return NeuronVendor(NeuronConfig.from_mapping(settings))
