"""What an inventory replacing the current one would take from the pods holding GPUs.

The admin API's ``PUT /inventory`` states each node's devices outright. A device it
leaves out, or offers with less memory, fewer cores or fewer slots than its pods hold,
would leave those pods counted beyond what the device has (a GPU at 20,000 of 1,024
MiB used). Such a replacement is refused; ``held_beyond`` says where and by whom.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu_extender.domain import DeviceUsage, NodeInventory
from vgpu_extender.services.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One held device the new inventory cannot keep its pods on."""

    node: str
    device: str
    problem: str
    pods: tuple[str, ...]  # UIDs

    def message(self, names: Mapping[str, str]) -> str:
        held_by = ", ".join(names.get(uid, uid) for uid in self.pods)
        return f"node {self.node}: GPU {self.device} {self.problem}; held by {held_by}"


def held_beyond(cluster: ClusterState, nodes: Sequence[NodeInventory]) -> list[Shortfall]:
    """Every device of ``nodes`` whose pods (as the index holds them) the new
    inventory would not hold, in node and device order."""
    found: list[Shortfall] = []
    with cluster.lock:
        index = cluster.index
        for node in sorted(nodes, key=lambda n: n.name):
            if node.name not in index:
                continue
            held: dict[str, list[tuple[str, DeviceUsage]]] = {}
            for allocation in index.pods_on(node.name):
                for uuid, use in allocation.assignment.footprint().items():
                    held.setdefault(uuid, []).append((allocation.pod_uid, use))
            offered = {device.uuid: device for device in node.devices}
            for uuid in sorted(held):
                pods = held[uuid]
                device = offered.get(uuid)
                if device is None:
                    problem = "is left out while pods hold it"
                else:
                    problem = _short(
                        memory=(sum(u.memory_mib for _, u in pods), device.memory_mib),
                        cores=(sum(u.cores for _, u in pods), device.cores),
                        slots=(sum(u.slots for _, u in pods), device.count),
                    )
                if problem:
                    found.append(Shortfall(node.name, uuid, problem, tuple(u for u, _ in pods)))
    return found


def _short(**used_and_offered: tuple[int, int]) -> str:
    units = {"memory": " MiB", "cores": " %", "slots": ""}
    parts = [
        f"would offer {offered}{units[what]} of {what} but its pods hold {used}{units[what]}"
        for what, (used, offered) in used_and_offered.items()
        if used > offered
    ]
    return "; ".join(parts)


def describe(shortfalls: Sequence[Shortfall], names: Callable[[str], Mapping[str, str]]) -> str:
    """The refusal's text; ``names(node)`` maps the node's pod UIDs to namespace/name."""
    by_node: dict[str, Mapping[str, str]] = {}
    lines = []
    for shortfall in shortfalls:
        if shortfall.node not in by_node:
            by_node[shortfall.node] = names(shortfall.node)
        lines.append(shortfall.message(by_node[shortfall.node]))
    return (
        "the inventory would take devices from the pods holding them: "
        + "; ".join(lines)
        + "; keep those devices as they are until their pods are gone"
    )
