"""A vendor defined only in the test suite: ``Widget`` accelerators, with two dimensions
(allocation slots and memory), their own resource names (``example.com/widget``,
``example.com/widget-mem``) and their own annotations. Nothing outside the tests knows
them: the proof that a vendor is a folder and one registry line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    ContainerRequest,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    PodRequest,
    Reason,
    RequestError,
)
from vgpu_extender.domain.share import (
    Capacity,
    CapacityView,
    HeldShare,
    ShareDemand,
    ShareModel,
    Stage,
)
from vgpu_extender.vendors import AdmissionNames
from vgpu_extender.vendors.base import ContainerAdmission, NodeFacts, NodeHandshake

COUNT = "example.com/widget"
MEMORY = "example.com/widget-mem"
PREFIX = "example.com/widget-"
NODE = "widget-node"


# ----------------------------------------------------------------- the share model
def _has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _has_memory(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.memory >= demand.memory_on(total.memory)


def _over(what: str) -> Any:
    def text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
        return f"{where} over-allocated: {what} {getattr(used, what)}/{getattr(total, what)}"

    return text


WIDGET_SHARE = ShareModel(
    name="WIDGET",
    stages=(
        Stage(Reason.SLOTS, _has_slot, _over("slots")),
        Stage(Reason.MEMORY, _has_memory, _over("memory"), measure="memory"),
    ),
    consumed=lambda total, demand: Capacity(demand.slots, demand.memory_on(total.memory), 0),
    held=lambda usage: HeldShare(usage.slots, usage.memory_mib, usage.cores, exclusive=False),
)


# ----------------------------------------------------------------- the vendor
class WidgetVendor:
    """The Vendor protocol for Widget accelerators: resource names, codecs, annotations."""

    name = "WIDGET"
    share = WIDGET_SHARE
    #: No words of its own: the reasons read as for any device.
    wording = NEUTRAL_WORDING
    admission = AdmissionNames(count=COUNT, memory=MEMORY, exclusive_cores="0")
    resource_names = frozenset({COUNT, MEMORY})
    inventory_annotation = PREFIX + "register"
    cordon_annotation = PREFIX + "cordon"
    node_annotation = PREFIX + "node"
    assignment_annotation = PREFIX + "devices"
    handshake: NodeHandshake | None = None

    def share_label(self, device: Device, memory_mib: int) -> str:
        return ""

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        containers: list[ContainerRequest] = []
        for init, key in ((True, "initContainers"), (False, "containers")):
            for container in spec.get(key) or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                try:
                    count, memory = int(limits.get(COUNT, 0)), int(limits.get(MEMORY, 0))
                except ValueError as exc:
                    raise RequestError(f"{container.get('name')}: {exc}") from exc
                containers.append(ContainerRequest(container["name"], count, memory, init=init))
        return PodRequest(
            uid=meta.get("uid", ""),
            namespace=meta.get("namespace", "default"),
            name=meta.get("name", ""),
            containers=tuple(containers),
        )

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        return None

    @property
    def node_keys(self) -> tuple[str, ...]:
        return (self.inventory_annotation,)

    @property
    def capacity_keys(self) -> tuple[str, ...]:
        return ()

    def decode_capacity(self, node: NodeFacts) -> tuple[Device, ...] | None:
        return None

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        value = node.annotations.get(self.inventory_annotation)
        return None if value is None else self.decode_inventory(value)

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        try:
            items = json.loads(value)
            return tuple(
                Device(
                    uuid=item["id"],
                    index=i,
                    count=item["count"],
                    memory_mib=item["mem"],
                    cores=0,
                    type="WIDGET",
                    vendor=self.name,
                )
                for i, item in enumerate(items)
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InventoryError(f"widget inventory: {exc}") from exc

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return json.dumps([{"id": d.uuid, "count": d.count, "mem": d.memory_mib} for d in devices])

    def decode_cordon(self, value: str) -> frozenset[str]:
        return frozenset(part for part in value.split(",") if part)

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return ";".join(
            ",".join(f"{g.uuid}:{g.memory_mib}" for g in grants) for grants in assignment.containers
        )

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        containers = tuple(
            tuple(
                DeviceGrant(uuid, int(memory), 0, self.name)
                for uuid, memory in (grant.split(":") for grant in segment.split(",") if grant)
            )
            for segment in value.split(";")
        )
        return containers[: len(init)] if init else containers

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        return {
            self.node_annotation: assignment.node,
            self.assignment_annotation: self.encode_assignment(assignment),
            PREFIX + "bind-time": str(bind_time),
        }
