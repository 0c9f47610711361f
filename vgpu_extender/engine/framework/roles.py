"""The plug-in roles, as kube-scheduler's framework has them: each one method and a name.

A plug-in implements only the roles it needs (a class that has the method has the role:
the protocols are structural, checked by mypy where the registry names each plug-in's
roles and at run time when a profile is built).

- ``FilterPlugin``: rejects some of the nodes the engine's fit found feasible.
- ``NodeScorePlugin``: a raw score per feasible node row (higher is better, NaN for a node
  it cannot judge); the engine scales raw scores to kube-scheduler's 0..10.
- ``DeviceRankPlugin``: orders the devices that fit a container on one node, best first.
- ``ObservePlugin``: learns from a request that was placed.
- ``SignPlugin`` (kube-scheduler's ``SignPlugin``): what of a request the plug-in's part of
  a remembered verdict reads, or None when its part cannot be remembered.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from vgpu_extender.domain import ContainerRequest, PodRequest, Rejection
from vgpu_extender.engine.choose import NodeState
from vgpu_extender.engine.index import ClusterIndex

FloatVec = npt.NDArray[np.float64]
IntVec = npt.NDArray[np.int64]


@runtime_checkable
class FilterPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def filter(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec
    ) -> Mapping[int, Rejection]:
        """Rejections of some of ``rows`` (feasible by fit), by position in ``rows``."""
        ...


@runtime_checkable
class NodeScorePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec: ...


@runtime_checkable
class DeviceRankPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]: ...


@runtime_checkable
class ObservePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def observe(self, request: PodRequest) -> None: ...


@runtime_checkable
class SignPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def signature(self, request: PodRequest) -> Hashable | None: ...
