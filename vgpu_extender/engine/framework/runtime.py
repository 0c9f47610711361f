"""The placement cycle in pure form: filter, prioritize, choose devices.

The planner runs a profile's plug-ins around the engine: the engine's fit, then the filter
plug-ins on the nodes it found feasible; the pod's node score plug-in, or the fallback
score plug-in where that one cannot tell the nodes apart; the pod's device rank plug-in
when devices are chosen. It holds no state of its own beyond the index it reads, so the
extender, the simulator and the benchmarks all place pods through exactly this code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vgpu_extender.domain import PodAssignment, PodRequest, Rejection
from vgpu_extender.engine.choose import choose_devices
from vgpu_extender.engine.fit import FitResult, fit
from vgpu_extender.engine.framework.profile import Profile
from vgpu_extender.engine.framework.roles import FloatVec, IntVec, NodeScorePlugin
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.scoring import extender_score_vector
from vgpu_extender.engine.topology import topology_scores


class Planner:
    def __init__(self, index: ClusterIndex, profile: Profile) -> None:
        self.index = index
        self.profile = profile

    def node_scorer(self, request: PodRequest) -> NodeScorePlugin:
        return self.profile.node_scorer(request)

    # ----------------------------------------------------------------- the verbs
    def filter(
        self, request: PodRequest, candidates: Sequence[str], *, explain: bool = True
    ) -> FitResult:
        """Feasible candidates and the reason for every other one (``explain=False``:
        feasible candidates only)."""
        ranker = self.profile.ranker(request)
        index = self.index
        signature = self.profile.signature(request)
        result = fit(
            index,
            request,
            candidates,
            exact=lambda row: choose_devices(index, request, index.name_of(row), ranker),
            explain=explain,
            remember=signature is not None,
            signature=signature,
        )
        for plugin in self.profile.filters:
            if not result.feasible:
                break
            _drop(result, plugin.filter(index, request, result.rows))
        return result

    def scores(self, request: PodRequest, rows: IntVec) -> FloatVec:
        """Raw scores of known node rows: the node score, or the fallback when it is flat."""
        raw: FloatVec = np.zeros(len(rows), dtype=np.float64)
        if request.managed or self.profile.config.score_unmanaged:
            raw = np.asarray(
                self.profile.node_scorer(request).score_nodes(self.index, request, rows)
            )
        if request.managed:
            # A vendor's device groups (HCCS rings): HAMi's topology bonus, added raw.
            topology = topology_scores(self.index, request, rows)
            if topology is not None:
                raw = raw + topology
        fallback = self.profile.fallback
        if fallback is not None and len(rows) > 1 and _flat(raw):
            raw = np.asarray(fallback.score_nodes(self.index, request, rows))
        return raw

    def prioritize(self, request: PodRequest, candidates: Sequence[str]) -> list[tuple[str, int]]:
        """Integer scores 0..10 for every candidate, in input order (unknown nodes score 0)."""
        rows = self.index.rows_of(candidates)
        known = np.flatnonzero(rows >= 0)
        scores = np.zeros(len(candidates), dtype=np.int64)
        scores[known] = extender_score_vector(self.scores(request, rows[known]))
        return list(zip(candidates, scores.tolist(), strict=True))

    def observe(self, request: PodRequest) -> None:
        """Tell the pod's plug-ins it was placed (``fragmentation`` learns its typical
        pods from these)."""
        self.profile.observe(request)

    def choose(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        """The devices ``request`` gets on ``node`` under its device policy."""
        return choose_devices(self.index, request, node, self.profile.ranker(request))

    def place(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        """The devices ``request`` gets on ``node`` (bind's choice), or the reason
        filter would give for rejecting the node.

        The device choice succeeds exactly where fit finds the node feasible (a
        property the engine's tests hold), so filter runs only when the choice fails,
        or when the profile has filter plug-ins: a refusal then reads exactly as
        filter's would, and a bind that fits costs one device choice.
        """
        chosen = self.choose(request, node)
        if isinstance(chosen, PodAssignment) and not self.profile.filters:
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


def _drop(result: FitResult, rejected: Mapping[int, Rejection]) -> None:
    """Remove the feasible nodes a filter plug-in rejected (by position), with its reasons."""
    if not rejected:
        return
    for position, rejection in rejected.items():
        result.rejections[result.feasible[position]] = rejection
    keep = [i for i in range(len(result.feasible)) if i not in rejected]
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
