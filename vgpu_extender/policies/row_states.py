"""Equal nodes, found cheaply: an id per distinct node state, kept up to date row by row.

Scoring a pod costs the same for every candidate node, yet most nodes of a cluster are
in one of a few states (empty, full, or alike after alike pods). Grouping them lets a
policy score each state once. Between two pods only the nodes that received a pod change,
so the ids are refreshed only for rows whose columns differ from the last snapshot.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vgpu_extender.engine import ClusterIndex

IntArr = npt.NDArray[np.int64]

_GRIDS = (
    "usable",
    "type_id",
    "mem_total",
    "mem_free",
    "cores_total",
    "cores_free",
    "slots_total",
    "slots_free",
)


class RowStates:
    """State ids per index row: two rows share an id exactly when their device columns and
    host CPU are equal. Bounded: ids are renumbered when more than ``4 x rows`` distinct
    states have been seen."""

    def __init__(self) -> None:
        self._index: ClusterIndex | None = None
        self._version = -1
        self._snapshot: list[npt.NDArray[np.generic]] = []
        self._cpu: IntArr = np.zeros(0, dtype=np.int64)
        self._ids: IntArr = np.zeros(0, dtype=np.int64)
        self._by_state: dict[bytes, int] = {}
        #: Counts renumberings: an id means the same state while this stays the same.
        self.generation = 0

    def group(self, index: ClusterIndex, rows: IntArr) -> tuple[IntArr, IntArr]:
        """(first, inverse): ``rows[first]`` are rows of distinct states, and row
        ``rows[i]`` has the state of ``rows[first][inverse[i]]``."""
        ids = self.ids(index)[rows]
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)

    def ids(self, index: ClusterIndex) -> IntArr:
        cols = index.cols
        if self._index is index and self._version == index.version:
            return self._ids
        self._version = index.version
        grids = [getattr(cols, name) for name in _GRIDS]
        if (
            self._index is not index
            or self._ids.shape[0] != cols.rows
            or self._snapshot[0].shape != grids[0].shape
        ):
            self._reset(index)
            return self._ids
        dirty = cols.cpu_free != self._cpu
        for grid, snap in zip(grids, self._snapshot, strict=True):
            dirty |= (grid != snap).any(axis=1)
        changed = np.flatnonzero(dirty)
        if len(changed):
            if len(self._by_state) + len(changed) > 4 * cols.rows:
                self._reset(index)
                return self._ids
            for grid, snap in zip(grids, self._snapshot, strict=True):
                snap[changed] = grid[changed]
            self._cpu[changed] = cols.cpu_free[changed]
            for row in changed.tolist():
                self._ids[row] = self._id_of(row)
        return self._ids

    def _reset(self, index: ClusterIndex) -> None:
        cols = index.cols
        self._index = index
        self._snapshot = [getattr(cols, name).copy() for name in _GRIDS]
        self._cpu = cols.cpu_free.copy()
        self._by_state = {}
        self.generation += 1
        self._ids = np.array([self._id_of(row) for row in range(cols.rows)], dtype=np.int64)

    def _id_of(self, row: int) -> int:
        key = b"".join(snap[row].tobytes() for snap in self._snapshot) + self._cpu[row].tobytes()
        return self._by_state.setdefault(key, len(self._by_state))
