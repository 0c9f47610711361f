"""What HAMi's vendors have in common, as a base for a ``Vendor``: the pod device encoding
under the vendor's keys, HAMi's global bind annotations, a cordon list and, for a vendor
whose node agent registers JSON, the registration codec.

A vendor gives its names, its share model and wording, its container rule, and what it
writes beyond the device annotations (``extra_annotations``); a vendor whose scheduler
reads node capacity instead of an annotation names it (``VendorNames.capacity``) and
gives ``devices_from_capacity``; ``decode_node`` then reads no annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from vgpu_extender.domain import (
    AnnotationError,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    PodRequest,
    Wording,
)
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors import hami_devices, hami_register
from vgpu_extender.vendors.base import (
    AdmissionNames,
    ContainerAdmission,
    NodeFacts,
    NodeHandshake,
)

#: HAMi's global pod keys (the NVIDIA vendor's spelling).
NODE_ANNOTATION = "hami.io/vgpu-node"
BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
BIND_TIME_ANNOTATION = "hami.io/bind-time"
BIND_PHASE_ALLOCATING = "allocating"
#: The node lock most vendors take at bind (``<RFC3339>,<ns>,<name>``).
MUTEX_LOCK = "hami.io/mutex.lock"


@dataclass(frozen=True, slots=True)
class VendorNames:
    """A vendor's fixed names: its word, the resources it manages, its node and pod keys.
    ``to_allocate`` is None for a vendor that writes only the ``allocated`` record;
    ``node_lock`` is the node annotation locked at bind (None: HAMi takes no lock);
    ``capacity`` the node capacity entries a vendor read from capacity reads (its
    ``inventory`` is then the count resource, no annotation)."""

    word: str
    resources: frozenset[str]
    inventory: str
    allocated: str
    to_allocate: str | None = None
    node_lock: str | None = None
    node_keys: tuple[str, ...] = ()
    device_type: str = ""
    capacity: tuple[str, ...] = ()

    @property
    def cordon(self) -> str:
        return f"hami.io/{self.word}-device-cordon"


def chip_containers(assignment: PodAssignment, word: str) -> tuple[tuple[DeviceGrant, ...], ...]:
    """The assignment's grants of ``word`` only, per container (every position kept)."""
    return tuple(
        tuple(grant for grant in grants if grant.vendor == word) for grants in assignment.containers
    )


def check_bind(assignment: PodAssignment, bind_time: int) -> None:
    if not assignment.node:
        raise AnnotationError("assignment has no node", value=assignment.node)
    if isinstance(bind_time, bool) or not isinstance(bind_time, int) or bind_time < 0:
        raise AnnotationError(
            "bind_time must be Unix seconds (a non-negative integer)", value=bind_time
        )


class HamiVendor:
    """The shared part of a HAMi vendor; subclasses give ``parse_pod`` and may add
    annotations, an admission rule or a node reading of their own."""

    def __init__(
        self,
        names: VendorNames,
        share: ShareModel,
        wording: Wording,
        admission: AdmissionNames,
    ) -> None:
        self._names = names
        self._share = share
        self._wording = wording
        self._admission = admission

    @property
    def names(self) -> VendorNames:
        return self._names

    @property
    def name(self) -> str:
        return self._names.word

    @property
    def share(self) -> ShareModel:
        return self._share

    @property
    def wording(self) -> Wording:
        return self._wording

    @property
    def admission(self) -> AdmissionNames:
        return self._admission

    @property
    def resource_names(self) -> frozenset[str]:
        return self._names.resources

    @property
    def inventory_annotation(self) -> str:
        return self._names.inventory

    @property
    def node_keys(self) -> tuple[str, ...]:
        if self._names.capacity:
            return self._names.node_keys
        return self._names.node_keys or (self._names.inventory,)

    @property
    def capacity_keys(self) -> tuple[str, ...]:
        return self._names.capacity

    def decode_capacity(self, node: NodeFacts) -> tuple[Device, ...] | None:
        """This vendor's devices from the node's capacity; None for a vendor read from
        an annotation, or a node without (or with 0 of) the vendor's count resource
        (HAMi drops a vendor that registers no devices)."""
        if not self._names.capacity or self._names.capacity[0] not in node.capacity:
            return None
        return self.devices_of(node) or None

    def devices_of(self, node: NodeFacts) -> tuple[Device, ...]:
        """The devices HAMi makes up for the node of a vendor read from capacity (a
        vendor that also reads the node's labels reads them here)."""
        return self.devices_from_capacity(node.name, node.capacity)

    def devices_from_capacity(
        self, node_name: str, capacity: Mapping[str, str]
    ) -> tuple[Device, ...]:
        """The devices HAMi makes up from the node's capacity (vendors read so)."""
        return ()

    @property
    def cordon_annotation(self) -> str:
        return self._names.cordon

    @property
    def node_annotation(self) -> str:
        return NODE_ANNOTATION

    @property
    def assignment_annotation(self) -> str:
        return self._names.allocated

    @property
    def handshake(self) -> NodeHandshake | None:
        return None

    def share_label(self, device: Device, memory_mib: int) -> str:
        return ""

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        raise NotImplementedError

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return None

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        return hami_register.decode_devices(
            value, vendor=self.name, default_type=self._names.device_type or self.name
        )

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return hami_register.encode_devices(devices)

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        if self._names.capacity:
            return None  # the devices are in the node's capacity (decode_capacity)
        value = node.annotations.get(self._names.inventory)
        return None if value is None else self.decode_inventory(value)

    def decode_cordon(self, value: str) -> frozenset[str]:
        if not isinstance(value, str):
            raise InventoryError(f"cordon annotation must be a string, not {type(value).__name__}")
        return frozenset(item.strip() for item in value.split(",") if item.strip())

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return hami_devices.encode_containers(
            chip_containers(assignment, self.name), vendor=self.name
        )

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        return hami_devices.decode_containers(value, init=init)

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        """The device annotations and HAMi's bind keys, then the vendor's own; ``{}`` when
        the pod has no device of this vendor."""
        check_bind(assignment, bind_time)
        containers = chip_containers(assignment, self.name)
        if not any(containers):
            return {}
        devices = self.encode_assignment(assignment)
        annotations = {NODE_ANNOTATION: assignment.node}
        if self._names.to_allocate is not None:
            annotations[self._names.to_allocate] = devices
        annotations[self._names.allocated] = devices
        annotations[BIND_PHASE_ANNOTATION] = BIND_PHASE_ALLOCATING
        annotations[BIND_TIME_ANNOTATION] = str(bind_time)
        annotations.update(
            self.extra_annotations(containers, assignment, bind_time=bind_time, request=request)
        )
        return annotations

    def extra_annotations(
        self,
        containers: tuple[tuple[DeviceGrant, ...], ...],
        assignment: PodAssignment,
        *,
        bind_time: int,
        request: PodRequest | None,
    ) -> dict[str, str]:
        """The vendor's side-channel annotations for its device plugin (none here)."""
        return {}


def with_vendor(
    containers: tuple[tuple[DeviceGrant, ...], ...], word: str
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """Grants read back under ``word`` (a vendor that writes a product type in place of
    its word, as AMD does)."""
    return tuple(tuple(replace(g, vendor=word) for g in grants) for grants in containers)


__all__ = [
    "BIND_PHASE_ALLOCATING",
    "BIND_PHASE_ANNOTATION",
    "BIND_TIME_ANNOTATION",
    "MUTEX_LOCK",
    "NODE_ANNOTATION",
    "HamiVendor",
    "VendorNames",
    "check_bind",
    "chip_containers",
    "with_vendor",
]
