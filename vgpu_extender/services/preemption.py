"""preempt: per candidate node, the fewest victims whose devices make the pod fit.

kube-scheduler proposes victims per node from its own dry run, which ignores the
devices this extender manages. For each node the search runs on a scratch copy of
that node alone: release the victims that hold devices there, lowest priority first
(then those freeing fewest devices), until the pod fits; then give back, highest
priority first, every victim the pod does not need after all. Nodes where no subset
helps are dropped. Victims holding no device on the node stay as proposed: they were
chosen for resources kube-scheduler itself accounts for.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.domain import PodAssignment, PodRequest, RequestError
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.policies import Planner
from vgpu_extender.services.cluster import ClusterState

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod kube-scheduler would evict; ``priority`` is known only from full pod objects."""

    uid: str
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """Victims in kube-scheduler's order (decreasing priority) and its PDB count."""

    victims: tuple[Victim, ...]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class PreemptOutcome:
    nodes: dict[str, NodeVictims]
    error: str = ""


class PreemptionService:
    def __init__(self, *, cluster: ClusterState) -> None:
        self._cluster = cluster

    def preempt(
        self, pod: Mapping[str, Any], candidates: Mapping[str, NodeVictims]
    ) -> PreemptOutcome:
        try:
            request = self._cluster.vendor.parse_pod(pod)
        except RequestError as exc:
            # No Error field exists in the preemption result: no preemption is the safe
            # answer, and the reason is logged.
            logger.warning("preempt: %s", exc)
            return PreemptOutcome({}, error=str(exc))
        if not request.managed:
            return PreemptOutcome({n: v for n, v in candidates.items() if v.victims})
        kept: dict[str, NodeVictims] = {}
        for node, proposed in candidates.items():
            chosen = self._victims_on(node, request, proposed)
            if chosen is not None:
                kept[node] = chosen
        return PreemptOutcome(kept)

    def _victims_on(
        self, node: str, request: PodRequest, proposed: NodeVictims
    ) -> NodeVictims | None:
        if not proposed.victims:
            return None  # kube-scheduler rejects a node with no victims
        scratch = self._scratch(node)
        if scratch is None:
            return None
        planner = Planner(scratch, self._cluster.registry, self._cluster.planner_config)

        def fits() -> bool:
            return isinstance(planner.choose(request, node), PodAssignment)

        if fits():
            return proposed  # the devices are no obstacle; keep kube-scheduler's choice
        holders = [
            (position, victim)
            for position, victim in enumerate(proposed.victims)
            if scratch.allocation(victim.uid) is not None
        ]
        known = all(v.priority is not None for _, v in holders)

        def rank(item: tuple[int, Victim]) -> tuple[int, int, int]:
            position, victim = item
            # The list comes in decreasing priority: later means lower when unknown.
            priority = victim.priority if known and victim.priority is not None else -position
            held = scratch.allocation(victim.uid)
            freed = len(held.assignment.device_uuids) if held is not None else 0
            return (priority, freed, -position)

        released: list[tuple[int, Victim, PodAssignment]] = []
        for position, victim in sorted(holders, key=rank):
            assignment = scratch.release(victim.uid)
            if assignment is None:
                continue
            released.append((position, victim, assignment))
            if fits():
                break
        else:
            return None
        needed: set[str] = set()
        for _position, victim, assignment in reversed(released):  # spare the highest first
            scratch.apply(victim.uid, assignment, check=False)
            if not fits():
                scratch.release(victim.uid)
                needed.add(victim.uid)
        holder_uids = {v.uid for _, v in holders}
        victims = tuple(v for v in proposed.victims if v.uid in needed or v.uid not in holder_uids)
        return NodeVictims(victims, proposed.num_pdb_violations)

    def _scratch(self, node: str) -> ClusterIndex | None:
        """A private index holding only ``node`` and its allocations."""
        with self._cluster.lock:
            index = self._cluster.index
            if node not in index:
                return None
            inventory = index.inventory(node)
            held = [(a.pod_uid, a.assignment) for a in index.pods_on(node)]
        scratch = ClusterIndex(initial_nodes=1, initial_slots=max(1, len(inventory.devices)))
        scratch.upsert_node(inventory)
        for uid, assignment in held:
            scratch.apply(uid, assignment, check=False)
        return scratch
