"""preempt: per candidate node, the fewest victims whose devices make the pod fit.

kube-scheduler's dry run cannot see the devices this extender manages (their
resources are ``ignoredByScheduler``): for a pod that only lacks a GPU it reprieves
every pod and proposes nodes with no victims at all. So the extender chooses the
victims itself, for every candidate node, among the pods holding devices there with
a lower priority than the preemptor (those kube-scheduler proposed and any others),
in the order of :mod:`~vgpu_extender.services.victims`, on a scratch copy of that
node alone. A node where no set helps is dropped, as is one where the pod fits
already but kube-scheduler proposed no victim (an empty list is an error to it).

Proposed victims holding no device on the node stay: kube-scheduler chose them for
resources it accounts for itself. Proposed victims holding devices are weighed like
any other pod, so one the devices do not need is spared.

What is known of the pods on a node:

- with a cluster, the pods on the node as the API server lists them at preempt time:
  ``spec.priority``, ``status.startTime``, labels for the PodDisruptionBudgets (also
  listed then); a pod being deleted already frees its devices without being named, and
  a pod holding devices that the listing does not show on the node (a bind in
  flight) keeps them and is no victim;
- standalone, the store's record (namespace, name, and the bind's time as the start)
  and the priority filter saw, when the pod is still remembered, else 0;
- a victim kube-scheduler sent as a full pod (``nodeCacheCapable: false``) is read
  from that object, the freshest there is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vgpu_extender import store
from vgpu_extender.domain import PodAssignment, PodRequest, RequestError
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import Planner
from vgpu_extender.kube import KubeClient, KubeError, disruption
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services import victims as order
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.pod_cache import PodCache
from vgpu_extender.store.sessions import Sessions

logger = logging.getLogger(__name__)

Pod = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod to evict: its UID and, when known, its priority and the pod object."""

    uid: str
    priority: int | None = None
    pod: Pod | None = None


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """Victims in kube-scheduler's order (decreasing priority) and its PDB count."""

    victims: tuple[Victim, ...]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class PreemptOutcome:
    nodes: dict[str, NodeVictims]
    error: str = ""


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What preemption knows of a pod on the node."""

    priority: int = 0
    started: datetime | None = None
    pod: Pod | None = None
    #: Being deleted or finished: its devices come back without an eviction.
    leaving: bool = False


@dataclass(slots=True)
class _Request:
    """One preempt call: the budgets are listed at most once, when first needed."""

    kube: KubeClient | None
    _pdbs: list[Pod] | None = None
    _pdbs_failed: bool = False

    def pdbs(self) -> list[Pod] | None:
        if self.kube is None or self._pdbs_failed:
            return None
        if self._pdbs is None:
            try:
                self._pdbs = list(self.kube.list_pdbs())
            except KubeError as exc:
                logger.warning("preempt: PodDisruptionBudgets not read: %s", exc)
                self._pdbs_failed = True
                return None
        return self._pdbs


class PreemptionService:
    def __init__(
        self,
        *,
        cluster: ClusterState,
        sessions: Sessions | None = None,
        kube: KubeClient | None = None,
        pod_cache: PodCache | None = None,
    ) -> None:
        self._cluster = cluster
        self._sessions = sessions
        self._kube = kube
        self._pods = pod_cache

    def preempt(
        self, pod: Mapping[str, Any], candidates: Mapping[str, NodeVictims]
    ) -> PreemptOutcome:
        try:
            request = self._cluster.vendors.parse_pod(pod)
        except RequestError as exc:
            # No Error field exists in the preemption result: no preemption is the safe
            # answer, and the reason is logged.
            logger.warning("preempt: %s", exc)
            return PreemptOutcome({}, error=str(exc))
        if not request.managed:
            return PreemptOutcome({n: v for n, v in candidates.items() if v.victims})
        call = _Request(self._kube)
        kept: dict[str, NodeVictims] = {}
        for node, proposed in candidates.items():
            chosen = self._victims_on(node, request, proposed, call)
            if chosen is not None:
                kept[node] = chosen
        return PreemptOutcome(kept)

    # ----------------------------------------------------------------- one node
    def _victims_on(
        self, node: str, request: PodRequest, proposed: NodeVictims, call: _Request
    ) -> NodeVictims | None:
        scratch = self._scratch(node)
        if scratch is None:
            return None
        planner = Planner(scratch, self._cluster.profile)

        def fits() -> bool:
            return isinstance(planner.choose(request, node), PodAssignment)

        if fits():
            # The devices are no obstacle: kube-scheduler's own choice, if it made one.
            return proposed if proposed.victims else None
        holders = {a.pod_uid: len(a.assignment.device_uuids) for a in scratch.pods_on(node)}
        facts = self._facts(node, holders, proposed)
        if facts is None:
            return None
        for uid in holders:
            if facts[uid].leaving:
                scratch.release(uid)
        if fits():
            return proposed if proposed.victims else None
        named = {v.uid for v in proposed.victims}
        pool = [
            order.Candidate(uid, facts[uid].priority, devices, facts[uid].started)
            for uid, devices in holders.items()
            if not facts[uid].leaving and (uid in named or facts[uid].priority < request.priority)
        ]
        taken: dict[str, PodAssignment] = {}

        def evict(candidate: order.Candidate) -> None:
            assignment = scratch.release(candidate.uid)
            if assignment is not None:
                taken[candidate.uid] = assignment

        def restore(candidate: order.Candidate) -> None:
            scratch.apply(candidate.uid, taken.pop(candidate.uid), check=False)

        chosen = order.choose(pool, fits=fits, evict=evict, restore=restore)
        if chosen is None:
            return None
        # kube-scheduler's victims that hold nothing here stay; with the chosen ones,
        # most important first, as kube-scheduler lists them.
        kept = [
            order.Candidate(v.uid, _priority(v, facts), 0, _started(v, facts))
            for v in proposed.victims
            if v.uid not in holders
        ]
        ranked = sorted([*kept, *chosen], key=order.importance_order)
        victims = tuple(_victim(c.uid, proposed, facts) for c in ranked)
        return NodeVictims(victims, self._pdb_violations(victims, proposed, call))

    def _scratch(self, node: str) -> ClusterIndex | None:
        """A private index holding only ``node`` and its allocations."""
        with self._cluster.lock:
            index = self._cluster.index
            if node not in index:
                return None
            inventory = index.inventory(node)
            held = [(a.pod_uid, a.assignment) for a in index.pods_on(node)]
        scratch = ClusterIndex(
            initial_nodes=1,
            initial_slots=max(1, len(inventory.devices)),
            shares=self._cluster.index.shares,
        )
        scratch.upsert_node(inventory)
        for uid, assignment in held:
            scratch.apply(uid, assignment, check=False)
        return scratch

    # ----------------------------------------------------------------- what is known
    def _facts(
        self, node: str, holders: Mapping[str, int], proposed: NodeVictims
    ) -> dict[str, PodFacts] | None:
        """Facts for every holder and proposed victim; ``None`` when the node's pods
        cannot be read (then nothing is evicted there: no guess at priorities)."""
        if self._kube is not None:
            try:
                listed = self._kube.list_pods(node=node)
            except KubeError as exc:
                logger.warning("preempt: pods on node %s not read: %s", node, exc)
                return None
            facts = _listed_facts(listed)
            for uid in holders:
                # Not on the node as the API server has it: a bind in flight, or a pod
                # whose deletion the watch has yet to apply. Its devices stay; no victim.
                facts.setdefault(uid, PodFacts(priority=_UNTOUCHABLE))
        else:
            facts = self._standalone_facts(node, [*holders, *(v.uid for v in proposed.victims)])
        for victim in proposed.victims:
            if victim.pod is not None:  # kube-scheduler's own copy: the freshest
                facts[victim.uid] = _pod_facts(victim.pod)
            facts.setdefault(victim.uid, PodFacts())
        return facts

    def _standalone_facts(self, node: str, uids: Iterable[str]) -> dict[str, PodFacts]:
        stored: dict[str, store.StoredPod] = {}
        if self._sessions is not None:
            with self._sessions() as session:
                stored = store.assignments(session, node=node)
        facts: dict[str, PodFacts] = {}
        for uid in uids:
            request = self._pods.get(uid) if self._pods is not None else None
            held = stored.get(uid)
            meta = held.meta if held is not None else None
            pod: dict[str, Any] | None = None
            if meta is not None:
                pod = {"metadata": {"name": meta.name, "namespace": meta.namespace, "uid": uid}}
            facts[uid] = PodFacts(
                priority=request.priority if request is not None else 0,
                started=(meta.bound_at or meta.created_at) if meta is not None else None,
                pod=pod,
            )
        return facts

    def _pdb_violations(
        self, victims: Sequence[Victim], proposed: NodeVictims, call: _Request
    ) -> int:
        pdbs = call.pdbs()
        if pdbs is not None:
            return disruption.violations([v.pod for v in victims if v.pod is not None], pdbs)
        # No budgets to read: kube-scheduler's count, for no more victims than it named.
        named = {v.uid for v in proposed.victims}
        return min(proposed.num_pdb_violations, sum(v.uid in named for v in victims))


#: Priority given to a pod the listing does not show: above any preemptor's.
_UNTOUCHABLE = 2**31


def _pod_facts(pod: Pod) -> PodFacts:
    spec = pod.get("spec")
    priority = spec.get("priority") if isinstance(spec, Mapping) else None
    if isinstance(priority, bool) or not isinstance(priority, int):
        priority = 0
    status = pod.get("status")
    started = _time(status.get("startTime")) if isinstance(status, Mapping) else None
    leaving = kobj.deletion_timestamp(pod) is not None or kobj.is_terminal(pod)
    return PodFacts(priority=priority, started=started, pod=pod, leaving=leaving)


def _listed_facts(pods: Iterable[Pod]) -> dict[str, PodFacts]:
    facts: dict[str, PodFacts] = {}
    for pod in pods:
        meta = pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        if isinstance(uid, str) and uid:
            facts[uid] = _pod_facts(pod)
    return facts


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _priority(victim: Victim, facts: Mapping[str, PodFacts]) -> int:
    return victim.priority if victim.priority is not None else facts[victim.uid].priority


def _started(victim: Victim, facts: Mapping[str, PodFacts]) -> datetime | None:
    return facts[victim.uid].started


def _victim(uid: str, proposed: NodeVictims, facts: Mapping[str, PodFacts]) -> Victim:
    for victim in proposed.victims:
        if victim.uid == uid and victim.pod is not None:
            return victim
    known = facts.get(uid, PodFacts())
    pod = known.pod if known.pod is not None else {"metadata": {"uid": uid}}
    return Victim(uid, known.priority, pod)
