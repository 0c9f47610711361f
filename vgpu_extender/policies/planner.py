"""The placement cycle in pure form: filter, prioritize, choose devices.

The planner joins the engine (what fits) to the policies (what is best). It holds no
state of its own beyond the index it reads, so the extender, the simulator and the
benchmarks all place pods through exactly this code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vgpu_extender.domain import PodAssignment, PodRequest, Reason, Rejection
from vgpu_extender.engine import (
    ClusterIndex,
    FitResult,
    choose_devices,
    extender_score_vector,
    fit,
)
from vgpu_extender.policies.base import FloatVec, IntVec, Policy
from vgpu_extender.policies.label_priority import LabelPriority
from vgpu_extender.policies.registry import PolicyRegistry


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """Policies used when a pod does not name its own (HAMi's defaults)."""

    node_policy: str = "binpack"
    device_policy: str = "spread"
    #: Scores nodes when the node policy cannot tell them apart, and pods that ask for no
    #: managed device. Empty string: no fallback.
    fallback_policy: str = "label-priority"
    #: Reject nodes that lack a usable priority label.
    require_label: bool = False
    #: Score pods that ask for no managed device with the node policy too. The trace
    #: replay needs it: there CPU-only pods compete for host CPU with GPU pods.
    score_unmanaged: bool = False


class Planner:
    def __init__(
        self,
        index: ClusterIndex,
        registry: PolicyRegistry | None = None,
        config: PlannerConfig | None = None,
    ) -> None:
        self.index = index
        self.registry = registry or PolicyRegistry()
        self.config = config or PlannerConfig()
        names = (self.config.node_policy, self.config.device_policy, self.config.fallback_policy)
        for name in filter(None, names):
            self.registry.get(name)  # fail at start-up on a bad name, not at the first pod

    # ----------------------------------------------------------------- policies
    def node_policy(self, request: PodRequest) -> Policy:
        return self.registry.get(request.node_policy or self.config.node_policy)

    def device_policy(self, request: PodRequest) -> Policy:
        return self.registry.get(request.device_policy or self.config.device_policy)

    # ----------------------------------------------------------------- the verbs
    def filter(
        self, request: PodRequest, candidates: Sequence[str], *, explain: bool = True
    ) -> FitResult:
        """Feasible candidates and the reason for every other one (``explain=False``:
        feasible candidates only)."""
        ranker = self.device_policy(request).rank_devices
        result = fit(
            self.index,
            request,
            candidates,
            exact=lambda row: choose_devices(self.index, request, self.index.name_of(row), ranker),
            explain=explain,
        )
        if self.config.require_label and result.feasible:
            self._reject_unlabelled(result)
        return result

    def scores(self, request: PodRequest, rows: IntVec) -> FloatVec:
        """Raw scores of known node rows: the node policy, or the fallback when it is flat."""
        raw: FloatVec = np.zeros(len(rows), dtype=np.float64)
        if request.managed or self.config.score_unmanaged:
            raw = np.asarray(self.node_policy(request).score_nodes(self.index, request, rows))
        fallback = self.config.fallback_policy
        if fallback and len(rows) > 1 and _flat(raw):
            raw = np.asarray(self.registry.get(fallback).score_nodes(self.index, request, rows))
        return raw

    def prioritize(self, request: PodRequest, candidates: Sequence[str]) -> list[tuple[str, int]]:
        """Integer scores 0..10 for every candidate, in input order (unknown nodes score 0)."""
        rows = self.index.rows_of(candidates)
        known = np.flatnonzero(rows >= 0)
        scores = np.zeros(len(candidates), dtype=np.int64)
        scores[known] = extender_score_vector(self.scores(request, rows[known]))
        return list(zip(candidates, scores.tolist(), strict=True))

    def observe(self, request: PodRequest) -> None:
        """Tell the pod's policies it was placed (``fragmentation`` learns its typical
        pods from these)."""
        node_policy, device_policy = self.node_policy(request), self.device_policy(request)
        node_policy.observe(request)
        if device_policy is not node_policy:
            device_policy.observe(request)

    def choose(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        """The devices ``request`` gets on ``node`` under its device policy."""
        return choose_devices(self.index, request, node, self.device_policy(request).rank_devices)

    def place(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        """The devices ``request`` gets on ``node`` (bind's choice), or the reason
        filter would give for rejecting the node.

        The device choice succeeds exactly where fit finds the node feasible (a
        property the engine's tests hold), so filter runs only when the choice fails,
        or when filter has a rule of its own (required labels): a refusal then reads
        exactly as filter's would, and a bind that fits costs one device choice.
        """
        chosen = self.choose(request, node)
        if isinstance(chosen, PodAssignment) and not self.config.require_label:
            return chosen
        rejection = self.filter(request, [node]).rejections.get(node)
        return rejection or chosen

    def best(
        self, request: PodRequest, candidates: Sequence[str], *, explain: bool = True
    ) -> tuple[str, PodAssignment] | FitResult:
        """The best node and its devices (decisive mode), or the fit result explaining why none."""
        return self.best_of(request, self.filter(request, candidates, explain=explain))

    def best_of(
        self, request: PodRequest, result: FitResult
    ) -> tuple[str, PodAssignment] | FitResult:
        """The best of the nodes ``result`` found feasible, with its devices; otherwise
        ``result`` itself, every node's reason added (it is changed in place)."""
        if not result.feasible:
            return result
        raw = self.scores(request, result.rows)
        order = np.argsort(-np.nan_to_num(raw, nan=-np.inf), kind="stable")
        for position in order:
            node = result.feasible[int(position)]
            chosen = self.choose(request, node)
            if isinstance(chosen, PodAssignment):
                return node, chosen
            result.rejections[node] = chosen
        result.feasible = []
        return result

    def _reject_unlabelled(self, result: FitResult) -> None:
        policy = self.registry.get("label-priority")
        if not isinstance(policy, LabelPriority):
            return
        problems = policy.label_problems(self.index, result.rows)
        if not problems:
            return
        keep = [i for i, name in enumerate(result.feasible) if name not in problems]
        for name, problem in problems.items():
            result.rejections[name] = Rejection(Reason.LABEL, unresolvable=True, detail=problem)
        result.feasible = [result.feasible[i] for i in keep]
        result.rows = result.rows[keep]


def _flat(raw: FloatVec) -> bool:
    """Whether the finite scores are all equal (or there are none)."""
    if not len(raw):
        return True
    low, high = raw.min(), raw.max()
    if np.isfinite(low) and np.isfinite(high):  # the usual case: no mask, no copy
        return bool(low == high)
    finite = raw[np.isfinite(raw)]
    return len(finite) == 0 or bool(finite.max() == finite.min())
