"""The vendors one process serves, as one: which a pod asks for, and what each writes.

HAMi walks every registered vendor for every container (init containers first): each
vendor reads the requests of its own resource names, so one container may ask for
NVIDIA GPUs and Ascend NPUs at once, and a node may carry devices of both. A
``VendorSet`` does the same over the vendors the settings name. A set of one vendor
answers exactly as that vendor does; with several, each vendor's asks are tagged with
its word, merged container by container, and each vendor reads and writes only its own
devices' annotations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    ContainerRequest,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    PodRequest,
    RequestError,
    Wording,
)
from vgpu_extender.domain.share import ShareModels
from vgpu_extender.vendors.base import NodeFacts, Vendor


class VendorSet:
    """An ordered set of vendors with distinct words; the first is the primary, whose
    conventions answer where only one can (HAMi's node annotation, the words of a pod
    that asks for no vendor)."""

    __slots__ = ("_by_name", "_members", "_resource_names", "_shares")

    def __init__(self, vendors: Sequence[Vendor]) -> None:
        members = tuple(vendors)
        if not members:
            raise ValueError("a vendor set needs at least one vendor")
        by_name: dict[str, Vendor] = {}
        for vendor in members:
            if vendor.name in by_name:
                raise ValueError(f"vendor {vendor.name!r} is listed twice")
            by_name[vendor.name] = vendor
        self._members = members
        self._by_name = by_name
        self._resource_names = frozenset().union(*(v.resource_names for v in members))
        self._shares = ShareModels(
            default=members[0].share,
            by_vendor=tuple((vendor.name, vendor.share) for vendor in members),
        )

    @classmethod
    def of(cls, vendor: Vendor | VendorSet) -> VendorSet:
        """``vendor`` as a set (a set is returned as it is)."""
        return vendor if isinstance(vendor, VendorSet) else cls((vendor,))

    # ----------------------------------------------------------------- reading
    @property
    def members(self) -> tuple[Vendor, ...]:
        return self._members

    @property
    def primary(self) -> Vendor:
        return self._members[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def share_label(self, device: Device, memory_mib: int) -> str:
        """The name the device's own vendor gives a share of it ("" when none)."""
        vendor = self._by_name.get(device.vendor)
        return vendor.share_label(device, memory_mib) if vendor is not None else ""

    def get(self, name: str) -> Vendor | None:
        """The member whose word is ``name`` (a device's ``vendor``), if any."""
        return self._by_name.get(name)

    @property
    def shares(self) -> ShareModels:
        """Every member's share model, by its word."""
        return self._shares

    @property
    def resource_names(self) -> frozenset[str]:
        """Every member's extended resources (the extender's managedResources)."""
        return self._resource_names

    @property
    def node_annotation(self) -> str:
        return self.primary.node_annotation

    @property
    def wording(self) -> Wording:
        """The primary's words."""
        return self.primary.wording

    def wording_for(self, request: PodRequest) -> Wording:
        """The words of the vendor ``request`` asks for (the primary's when none); a pod
        asking for several vendors reads the words for any device, which say no vendor's
        name for another's failure."""
        if len(self._members) == 1:
            return self.primary.wording
        asked = [self._by_name[name] for name in request.vendors if name in self._by_name]
        if not asked:
            return self.primary.wording
        return asked[0].wording if len(asked) == 1 else NEUTRAL_WORDING

    # ----------------------------------------------------------------- pods
    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        """The pod's request of every member; raises ``RequestError`` on bad input."""
        if len(self._members) == 1:
            return self._members[0].parse_pod(pod)
        parsed: list[tuple[Vendor, PodRequest]] = []
        refused: RequestError | None = None
        for vendor in self._members:
            try:
                parsed.append((vendor, vendor.parse_pod(pod)))
            except RequestError as exc:
                # A vendor's own annotations may be bad on a pod that asks nothing of it
                # (a NUMA flag on an NPU pod): the pod is refused only by the vendors it
                # asks for.
                if _mentions(pod, vendor.resource_names):
                    raise
                refused = refused or exc
        if not parsed:
            assert refused is not None
            raise refused
        asked = [(vendor, request) for vendor, request in parsed if request.managed]
        if not asked:
            return parsed[0][1]
        tagged = [_tagged(request, vendor.name) for vendor, request in asked]
        if len(tagged) == 1:
            return tagged[0]
        return _merged(tagged)

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        """Every member's bind annotations, each over its own devices' grants."""
        if len(self._members) == 1:
            return self.primary.bind_annotations(assignment, bind_time=bind_time, request=request)
        annotations: dict[str, str] = {}
        for vendor in self._members:
            own = _only(assignment, vendor.name)
            if own is not None:
                annotations.update(
                    vendor.bind_annotations(own, bind_time=bind_time, request=request)
                )
        return annotations

    def assignment_keys(self) -> tuple[str, ...]:
        """The pod annotations committed allocations are rebuilt from, one per member."""
        return tuple(dict.fromkeys(v.assignment_annotation for v in self._members))

    def decode_assignments(
        self, annotations: Mapping[str, str], *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...] | None:
        """Grants per container from every member's device annotation, merged position
        by position; None when the pod carries none. Raises ``AnnotationError``."""
        merged: list[list[DeviceGrant]] | None = None
        for vendor in self._members:
            value = annotations.get(vendor.assignment_annotation)
            if value is None:
                continue
            grants = vendor.decode_assignment(value, init=init)
            if merged is None:
                merged = [list(container) for container in grants]
                continue
            while len(merged) < len(grants):
                merged.append([])
            for position, container in enumerate(grants):
                merged[position].extend(container)
        return None if merged is None else tuple(tuple(c) for c in merged)

    # ----------------------------------------------------------------- nodes
    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        """Every member's devices on a node, in member order, from its annotations or,
        for a vendor read so, its capacity; None when the node carries no member's
        inventory. Raises ``InventoryError`` naming the vendor at fault."""
        found: list[Device] | None = None
        for vendor in self._members:
            try:
                devices = vendor.decode_node(node)
                if devices is None and vendor.capacity_keys:
                    devices = vendor.decode_capacity(node)
            except InventoryError as exc:
                if len(self._members) == 1:
                    raise
                raise InventoryError(f"{vendor.name}: {exc}") from exc
            if devices is not None:
                found = [*(found or ()), *devices]
        return None if found is None else tuple(found)

    def capacity_keys(self) -> tuple[str, ...]:
        """Every node capacity entry the members' inventories are read from."""
        return tuple(dict.fromkeys(k for v in self._members for k in v.capacity_keys))

    def inventory_keys(self) -> tuple[str, ...]:
        """The node annotations the members read inventories from."""
        return tuple(dict.fromkeys(v.inventory_annotation for v in self._members))

    def node_keys(self) -> tuple[str, ...]:
        """Every node annotation the members' inventories are read from."""
        return tuple(dict.fromkeys(key for v in self._members for key in v.node_keys))

    def cordon_keys(self) -> tuple[str, ...]:
        """The node annotations listing cordoned devices, one per distinct key."""
        return tuple(dict.fromkeys(v.cordon_annotation for v in self._members))

    def decode_cordons(self, annotations: Mapping[str, str]) -> frozenset[str]:
        """Cordoned UUIDs from every member's cordon annotation."""
        cordoned: frozenset[str] = frozenset()
        seen: set[str] = set()
        for vendor in self._members:
            key = vendor.cordon_annotation
            raw = annotations.get(key)
            if raw and key not in seen:
                seen.add(key)
                cordoned |= vendor.decode_cordon(raw)
        return cordoned


def _tagged(request: PodRequest, word: str) -> PodRequest:
    """``request`` with every ask and its selector marked as ``word``'s."""
    containers = tuple(
        replace(c, vendor=c.vendor or word) if c.wants_devices else c for c in request.containers
    )
    selector = request.selector
    if selector.constrains and not selector.vendor:
        selector = replace(selector, vendor=word)
    return replace(request, containers=containers, selector=selector)


def _merged(requests: Sequence[PodRequest]) -> PodRequest:
    """One request from several vendors' requests of the same pod: each container's asks
    side by side (``also``); pod-level fields from the first."""
    first = requests[0]
    lengths = {len(r.containers) for r in requests}
    if len(lengths) != 1:
        raise RequestError(
            "vendors disagree on the pod's containers", field="spec.containers", value=lengths
        )
    containers: list[ContainerRequest] = []
    for position, base in enumerate(first.containers):
        asks = [r.containers[position] for r in requests if r.containers[position].wants_devices]
        if not asks:
            containers.append(base)
        else:
            containers.append(replace(asks[0], also=tuple(asks[1:])))
    constraining = [r.selector for r in requests if r.selector.constrains]
    if len(constraining) > 1:
        vendors = ", ".join(s.vendor for s in constraining)
        raise RequestError(
            f"device selectors of several vendors in one pod are not supported ({vendors})",
            field="metadata.annotations",
            value=vendors,
        )
    selector = constraining[0] if constraining else first.selector
    numa_bind = any(r.numa_bind for r in requests)
    return replace(first, containers=tuple(containers), selector=selector, numa_bind=numa_bind)


def _mentions(pod: Mapping[str, Any], names: frozenset[str]) -> bool:
    """Whether a container of ``pod`` names one of ``names`` in its limits or requests."""
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(spec, Mapping):
        return False
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind)
        if not isinstance(containers, list):
            continue
        for container in containers:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for part in ("limits", "requests"):
                given = resources.get(part)
                if isinstance(given, Mapping) and any(name in given for name in names):
                    return True
    return False


def _only(assignment: PodAssignment, word: str) -> PodAssignment | None:
    """The grants of ``assignment`` on devices of ``word``, or None when it has none."""
    containers = tuple(
        tuple(g for g in grants if g.vendor == word) for grants in assignment.containers
    )
    if not any(containers):
        return None
    return PodAssignment(assignment.node, containers, assignment.init)
