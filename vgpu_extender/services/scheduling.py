"""filter, prioritize and decisive filter: read-only placement through the ``Planner``.

Results are structured (names, ``Rejection``s, integer scores); the HTTP layer turns
them into kube-scheduler's wire form. A pod that asks for no managed resource passes
through untouched; a pod that cannot be read is a real error, reported in ``error``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    PodAssignment,
    PodRequest,
    Rejection,
    RequestError,
    Wording,
)
from vgpu_extender.engine import extender_score_vector
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.hooks import FilterObserver
from vgpu_extender.services.inventory import InventoryService, NodeRef, NodeView
from vgpu_extender.services.pod_cache import PodCache

logger = logging.getLogger(__name__)

#: The reason given, in decisive mode, to feasible nodes that were not chosen.
NOT_CHOSEN = "another node fits better (decisive mode)"


@dataclass(frozen=True, slots=True)
class Priorities:
    """Integer scores 0..10, one per host, in the order of the request."""

    hosts: Sequence[str]
    scores: npt.NDArray[np.int64]


@dataclass(slots=True)
class FilterOutcome:
    """Feasible names in input order, and a reason for every other candidate."""

    feasible: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""
    #: The words the reasons are written in (the vendor's).
    wording: Wording = NEUTRAL_WORDING


def _reject(outcome: FilterOutcome, rejections: Mapping[str, Rejection], wording: Wording) -> None:
    outcome.wording = wording
    for name, rejection in rejections.items():
        target = outcome.unresolvable if rejection.unresolvable else outcome.failed
        target[name] = rejection.message(wording)


class SchedulingService:
    """The read-only verbs."""

    def __init__(
        self,
        *,
        cluster: ClusterState,
        pod_cache: PodCache,
        inventory: InventoryService,
        admit_nodes: bool = False,
        on_filtered: FilterObserver | None = None,
    ) -> None:
        self._cluster = cluster
        #: Told of every filter answer (metrics, the Events of unschedulable pods).
        self._on_filtered = on_filtered
        self._pods = pod_cache
        self._inventory = inventory
        #: Standalone only: with a cluster, inventory comes from the watched Node
        #: objects alone, never from what a request carries.
        self._admit_nodes = admit_nodes

    @property
    def admits_nodes(self) -> bool:
        """Whether a request's Node objects may register nodes (standalone only)."""
        return self._admit_nodes

    def parse(self, pod: Mapping[str, Any]) -> PodRequest:
        """The pod's request; remembered by UID for bind. Raises ``RequestError``.

        The same version of a pod parsed before (filter, then prioritize) is not parsed
        again."""
        uid, version = _identity(pod)
        if uid and version:
            known = self._pods.get(uid, version=version)
            if known is not None:
                return known
        request = self._cluster.vendors.parse_pod(pod)
        if request.managed:
            self._pods.put(request, version=version)
        return request

    def observe_nodes(self, nodes: Sequence[NodeView | NodeRef] | None) -> None:
        """A request's Node objects (``nodeCacheCapable: false``) are evidence, never
        authority: standalone, they register nodes the extender does not know yet;
        they never change or remove a known node, and with a cluster they are not
        read at all. Called only once the pod is known to be readable, so a refused
        request leaves nothing behind."""
        if nodes and self._admit_nodes:
            self._inventory.admit(nodes)

    def _managed_request(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        nodes: Sequence[NodeView | NodeRef] | None,
    ) -> PodRequest | FilterOutcome:
        """The pod's request when it asks for managed devices; otherwise the finished
        outcome (an error for an unreadable pod, every node for an unmanaged one)."""
        try:
            request = self.parse(pod)
        except RequestError as exc:
            return FilterOutcome(error=f"pod {_pod_name(pod)}: {exc}")
        self.observe_nodes(nodes)
        if not request.managed:
            return FilterOutcome(feasible=list(candidates))
        return request

    def filter(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> FilterOutcome:
        return self._reported(pod, candidates, self._filter(pod, candidates, nodes))

    def filter_one(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> FilterOutcome:
        """Decisive mode: only the best node survives (HAMi's and the seed's behaviour)."""
        return self._reported(pod, candidates, self._filter_one(pod, candidates, nodes))

    def _reported(
        self, pod: Mapping[str, Any], candidates: Sequence[str], outcome: FilterOutcome
    ) -> FilterOutcome:
        if self._on_filtered is not None:
            self._on_filtered.filtered(pod, len(candidates), outcome)
        return outcome

    def _filter(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        nodes: Sequence[NodeView | NodeRef] | None,
    ) -> FilterOutcome:
        request = self._managed_request(pod, candidates, nodes)
        if isinstance(request, FilterOutcome):
            return request
        with self._cluster.lock:
            result = self._cluster.planner.filter(request, candidates)
        outcome = FilterOutcome(feasible=result.feasible)
        _reject(outcome, result.rejections, self._cluster.vendors.wording_for(request))
        return outcome

    def _filter_one(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        nodes: Sequence[NodeView | NodeRef] | None,
    ) -> FilterOutcome:
        request = self._managed_request(pod, candidates, nodes)
        if isinstance(request, FilterOutcome):
            return request
        with self._cluster.lock:
            result = self._cluster.planner.filter(request, candidates)
            feasible = list(result.feasible)
            best = self._cluster.planner.best_of(request, result)
        outcome = FilterOutcome()
        if isinstance(best, tuple):
            chosen = best[0]
            outcome.feasible = [chosen]
            for name in feasible:
                if name != chosen:
                    outcome.failed[name] = NOT_CHOSEN
        _reject(outcome, result.rejections, self._cluster.vendors.wording_for(request))
        return outcome

    def prioritize(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> Priorities:
        """Scores 0..10 in input order (unknown nodes 0). An unreadable pod scores
        nothing (logged): the scheduler ignores prioritize errors anyway.

        The planner's raw scores are scaled here into one int vector rather than
        through ``Planner.prioritize``'s (name, score) pairs: at 5,000 nodes the pairs
        cost more than the scoring itself, and the wire encoder writes the vector
        straight into its answer.
        """
        try:
            request = self.parse(pod)
        except RequestError as exc:
            logger.warning("prioritize: pod %s: %s", _pod_name(pod), exc)
            return Priorities((), np.zeros(0, dtype=np.int64))
        self.observe_nodes(nodes)
        planner = self._cluster.planner
        with self._cluster.lock:
            rows = planner.index.rows_of(candidates)
            known = rows >= 0
            if known.all():  # the usual case: no copy, no scatter
                return Priorities(candidates, extender_score_vector(planner.scores(request, rows)))
            scores = np.zeros(len(candidates), dtype=np.int64)
            if known.any():
                scores[known] = extender_score_vector(planner.scores(request, rows[known]))
        return Priorities(candidates, scores)

    def choose(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        with self._cluster.lock:
            return self._cluster.planner.choose(request, node)


def _identity(pod: Mapping[str, Any]) -> tuple[str, str]:
    """The pod's UID and resourceVersion, "" where missing or not strings."""
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    if not isinstance(metadata, Mapping):
        return "", ""
    uid, version = metadata.get("uid"), metadata.get("resourceVersion")
    return (
        uid if isinstance(uid, str) else "",
        version if isinstance(version, str) else "",
    )


def _pod_name(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    if isinstance(metadata, Mapping):
        return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or '?'}"
    return "?"
