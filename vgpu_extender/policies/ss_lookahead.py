"""``ss-lookahead``: ``lookahead`` among the candidates Sum-of-Squares packing keeps.

For a pod that takes one device, ``sum-squares``' step first (``GapChoice``: the
(node, device) candidates whose gap change least raises ``sum_g N(g)^2``, gaps counted
over the cluster), then ``lookahead``'s score among those alone: FGD's integer score plus
one typical pod of outlook (weight 2 by default), its beam drawn from the kept
candidates. One-device placements are charged the device capacity they leave the node's
host CPU unable to feed (``host_stranding``, on by default). Other pods are placed as
``fragmentation`` places them. It costs what ``lookahead`` costs (several milliseconds a
pod at a thousand nodes): a decisive-mode policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec
from vgpu_extender.policies.fragment_math import Devices, paper_score
from vgpu_extender.policies.fragmentation import Fragmentation, one_device_delta, one_share
from vgpu_extender.policies.lookahead import Lookahead, LookaheadArgs
from vgpu_extender.policies.sum_squares import GapChoice
from vgpu_extender.policies.typical_pods import ShapeCounter


@dataclass(frozen=True, slots=True)
class SsLookaheadArgs(LookaheadArgs):
    """``lookahead``'s arguments, the outlook weighing twice as much by default, whether
    only gaps some typical pod fits count, and host CPU stranding charged by default."""

    #: Within SS's gap class the outlook is worth more than in ``lookahead``: weight 2
    #: beat 1 on the mean of every trace replayed, 0.5 and 3 did worse (docs/simulation.md).
    weight: float = 2.0
    live_gaps: bool = True
    #: Host CPU stranding charged (``host_stranding``): +0.23 pt on the default trace,
    #: where whole GPUs were left free on nodes whose CPU was gone (docs/simulation.md).
    host_strand: float = 1.0

    def __post_init__(self) -> None:
        LookaheadArgs.__post_init__(self)
        if not isinstance(self.live_gaps, bool):
            raise ArgumentError("live_gaps", f"must be a bool, not {self.live_gaps!r}")


@dataclass(slots=True)
class SsLookahead(Lookahead):
    """``lookahead`` within the gap class Sum-of-Squares chooses."""

    name: str = "ss-lookahead"
    choice: GapChoice = field(default_factory=GapChoice)

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        container = one_share(request)
        if container is None:
            self.choice.counts = None
            return Fragmentation._score_distinct(self, index, request, rows, d)
        shapes = self.compiled()
        delta = one_device_delta(d, shapes, container, request.cpu_milli)
        score = np.where(np.isfinite(delta), paper_score(delta), -np.inf)
        keep = self.choice.keep(index, d, shapes, self._compiled[0], container, score)
        delta = np.where(keep, delta, -np.inf)
        first = paper_score(delta)
        total = first
        if self.weight:
            total = first + self._outlook_points(index, rows, d, container, request, first, delta)
        total = np.where(keep, total, -np.inf)
        order = delta if self.raw_devices else np.where(keep, first, -np.inf)
        return self._settle(d, request, container, total, order)

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        """FGD's order, the devices of least ``SS`` first."""
        ranked = Fragmentation.rank_devices(self, state, container, candidates)
        return self.choice.order(state, self.compiled(), container, ranked)


def build_ss_lookahead(args: SsLookaheadArgs) -> SsLookahead:
    """The policy from its arguments: fixed typical pods when given, else learned online."""
    fixed = tuple(args.typical_pods)
    return SsLookahead(
        shapes=fixed,
        learner=None if fixed else ShapeCounter(),
        quantize=args.quantize,
        raw_devices=args.raw_devices,
        host_pack=args.host_pack,
        host_strand=args.host_strand,
        weight=args.weight,
        beam=args.beam,
        window=args.window,
        choice=GapChoice(live=args.live_gaps),
    )
