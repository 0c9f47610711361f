"""HAMi's usage-based policies, ``binpack`` and ``spread`` (spec: hami.md §6).

Both score with the same formulas; only the direction differs, so each policy is one
instance of ``UsagePolicy`` with a sign, not a copy.

- Node score, from usage before this pod:
  ``10 * (sum used slots / sum slots + sum used cores / sum cores + sum used mem / sum mem)``.
- Device score for one container's share:
  ``10 * (w_slot (1 + used) / count + w_core (req cores + used cores) / cores
  + w_mem (req mem + used mem) / mem)``.

``binpack`` prefers the highest scores (fill what is used), ``spread`` the lowest.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec


@dataclass(frozen=True, slots=True)
class DeviceWeights:
    slot: float = 1.0
    core: float = 1.0
    memory: float = 1.0

    def __post_init__(self) -> None:
        for name in ("slot", "core", "memory"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ArgumentError(
                    f"device_weights.{name}", f"must be a number >= 0, not {value!r}"
                )


@dataclass(frozen=True, slots=True)
class UsageArgs:
    """``binpack``'s and ``spread``'s arguments: how much each resource weighs in the
    device score."""

    device_weights: DeviceWeights = DeviceWeights()

    def __post_init__(self) -> None:
        if not isinstance(self.device_weights, DeviceWeights):
            raise ArgumentError(
                "device_weights", f"must be DeviceWeights, not {type(self.device_weights).__name__}"
            )


def node_usage_score(index: ClusterIndex, rows: IntVec) -> FloatVec:
    """HAMi's ``ComputeDefaultScore`` for each row, from the index's per-row sums."""
    cols = index.cols
    total = np.zeros(len(rows), dtype=np.float64)
    for capacity, free in (
        (cols.row_slots_total, cols.row_slots_free),
        (cols.row_cores_total, cols.row_cores_free),
        (cols.row_mem_total, cols.row_mem_free),
    ):
        cap = capacity.take(rows)
        used = cap - free.take(rows)
        total += np.divide(used, cap, out=np.zeros(len(rows)), where=cap > 0)
    score: FloatVec = 10.0 * total
    return score


def device_usage_score(
    state: NodeState, slot: int, container: ContainerRequest, weights: DeviceWeights
) -> float:
    """HAMi's ``ComputeScore`` for one device and one container share."""
    count = state.slots_total[slot] or 1
    cores = state.cores_total[slot] or 1
    mem = state.mem_total[slot] or 1
    used_slots = state.slots_total[slot] - state.slots_free[slot]
    used_cores = state.cores_total[slot] - state.cores_free[slot]
    used_mem = state.mem_total[slot] - state.mem_free[slot]
    req_mem: int = container.memory_on(state.mem_total[slot])
    return 10.0 * (
        weights.slot * (1 + used_slots) / count
        + weights.core * (container.cores + used_cores) / cores
        + weights.memory * (req_mem + used_mem) / mem
    )


@dataclass(frozen=True, slots=True)
class UsagePolicy:
    """``binpack`` (sign +1) or ``spread`` (sign -1) at node and device level."""

    name: str
    sign: float
    weights: DeviceWeights = DeviceWeights()

    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec:
        # The score reads only each row's own sums: remembered per row until it changes.
        usage = index.row_vector(node_usage_score, node_usage_score)
        return self.sign * usage.take(rows)

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        # Ties go to the lower device index, so the choice is deterministic.
        return sorted(
            candidates,
            key=lambda s: (
                -self.sign * device_usage_score(state, s, container, self.weights),
                state.devices[s].index,
            ),
        )

    def signature(self, request: PodRequest) -> Hashable:
        # Scores and device order read the request only through the share model's view
        # of its containers (already in the engine's part of the signature).
        return (self.name, self.sign, self.weights)


def binpack(args: UsageArgs = UsageArgs()) -> UsagePolicy:
    return UsagePolicy("binpack", +1.0, args.device_weights)


def spread(args: UsageArgs = UsageArgs()) -> UsagePolicy:
    return UsagePolicy("spread", -1.0, args.device_weights)
