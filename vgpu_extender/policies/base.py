"""What a placement policy is: a node scorer and a device ranker, under one name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState

FloatVec = npt.NDArray[np.float64]
IntVec = npt.NDArray[np.int64]


class Policy(Protocol):
    """A named placement policy.

    ``score_nodes`` gives a raw score per feasible node row (higher is better; NaN for a
    node it cannot judge); the engine scales raw scores to kube-scheduler's 0..10.
    ``rank_devices`` orders the devices that fit a container on one node, best first.
    """

    @property
    def name(self) -> str: ...

    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec: ...

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]: ...

    def observe(self, request: PodRequest) -> None:
        """Learn from a request that was placed (policies that learn the workload)."""
        ...


class NeutralDevices:
    """Mix-in for policies with no device preference: lowest device index first."""

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        return sorted(candidates, key=lambda s: state.devices[s].index)

    def observe(self, request: PodRequest) -> None:
        return None
