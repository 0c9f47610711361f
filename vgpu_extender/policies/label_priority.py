"""``label-priority``: rank nodes by an integer node label (the original extender demo).

The label's value (``priority.lixueduan.com: "20"``) is a raw score; the engine scales
raw scores to 0..10, so raw label values never reach kube-scheduler. A node without
the label, or with a value that is not an integer, gets NaN (scored lowest) and is
reported by ``label_problems``. As a filter plug-in, it rejects the nodes without a usable
label (unresolvable: only relabelling the node helps).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest, Reason, Rejection
from vgpu_extender.engine import ClusterIndex, NodeState, by_index
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec

DEFAULT_LABEL = "priority.lixueduan.com"


@dataclass(frozen=True, slots=True)
class LabelPriorityArgs:
    """``label-priority``'s arguments: the node label whose integer value ranks nodes."""

    label: str = DEFAULT_LABEL

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ArgumentError("label", f"must be a non-empty string, not {self.label!r}")


def label_value(labels: Mapping[str, str], key: str) -> tuple[float, str]:
    """(value, problem): the label as a number, or NaN and what is wrong with it."""
    raw = labels.get(key)
    if raw is None:
        return float("nan"), f"label {key} missing"
    try:
        return float(int(str(raw).strip())), ""
    except (ValueError, OverflowError):  # OverflowError: too large for a float
        return float("nan"), f"label {key}={raw!r} is not an integer"


class LabelPriority:
    """Scores nodes by their priority label, and filters out nodes without a usable one;
    the values are cached per row until the inventory changes, so scoring is one gather."""

    def __init__(self, label: str = DEFAULT_LABEL, name: str = "label-priority") -> None:
        self.name = name
        self.label = label

    @classmethod
    def of(cls, args: LabelPriorityArgs) -> LabelPriority:
        return cls(label=args.label)

    def values(self, index: ClusterIndex) -> FloatVec:
        """The label value of every row (NaN where missing, unreadable or empty)."""
        return index.static_vector(("label", self.label), self._read_labels)

    def _read_labels(self, index: ClusterIndex) -> FloatVec:
        values = np.full(index.cols.rows, np.nan)
        for name in index.node_names():
            row = index.row_of(name)
            if row is not None:
                values[row] = label_value(index.inventory(name).labels, self.label)[0]
        return values

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        """No device preference (it ranks nodes): lowest device index first, so that it
        may also serve as the device policy, as it always could."""
        return by_index(state, container, candidates)

    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec:
        scores: FloatVec = self.values(index)[rows]
        return scores

    def filter(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec
    ) -> dict[int, Rejection]:
        """The rows (by position) whose label is missing or unreadable, rejected."""
        rejected: dict[int, Rejection] = {}
        for r in np.flatnonzero(np.isnan(self.values(index)[rows])).tolist():
            name = index.name_of(int(rows[r]))
            problem = label_value(index.inventory(name).labels, self.label)[1]
            rejected[r] = Rejection(Reason.LABEL, unresolvable=True, detail=problem)
        return rejected

    def signature(self, request: PodRequest) -> Hashable:
        return (self.name, self.label)  # reads nothing of the request

    def label_problems(self, index: ClusterIndex, rows: IntVec) -> dict[str, str]:
        """Nodes whose label is missing or unreadable, with the problem."""
        problems: dict[str, str] = {}
        for r in np.flatnonzero(np.isnan(self.values(index)[rows])):
            name = index.name_of(int(rows[r]))
            problems[name] = label_value(index.inventory(name).labels, self.label)[1]
        return problems
