"""Remembered rejections: a node's verdict for a request shape, kept while its row is unchanged.

kube-scheduler filters every pod against every node, so in a busy cluster the same full
nodes are rejected pod after pod, for the same reason. Explaining a rejection depends
only on the request's shape and on the node's own row (its columns, inventory and
allocations), so a verdict stays true until the row's stamp moves (see
``ClusterIndex.row_stamps``). A shape may also name an epoch for the index-wide data
it reads (the NUMA ids, for NUMA-bound requests); a new epoch drops its verdicts.

Per shape, verdicts are two arrays indexed by row (the stamp they were made at, and the
``Rejection``), so a lookup is a few vectorised operations however many rows are
rejected. Like the index, a cache is not thread-safe: callers hold the index's lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np
import numpy.typing as npt

from vgpu_extender.domain import Rejection
from vgpu_extender.engine.columns import IntVec

#: Stamp of a row holding no verdict: index stamps are never negative.
_NONE = -1
#: Request shapes remembered at once: pods come in a few shapes (one GPU, a share of
#: one, a whole node), and each shape keeps two arrays the size of the grid.
DEFAULT_SHAPES = 12

Explain = Callable[[IntVec], list[Rejection]]


class _ShapeVerdicts:
    """One request shape's verdicts, by row."""

    __slots__ = ("epoch", "stamps", "verdicts")

    def __init__(self, epoch: Hashable, rows: int) -> None:
        self.epoch = epoch
        self.stamps: IntVec = np.full(rows, _NONE, dtype=np.int64)
        self.verdicts: npt.NDArray[np.object_] = np.empty(rows, dtype=object)

    def grow(self, rows: int) -> None:
        """Cover ``rows`` rows (the grid grew): new rows hold no verdict."""
        if rows <= len(self.stamps):
            return
        stamps = np.full(rows, _NONE, dtype=np.int64)
        stamps[: len(self.stamps)] = self.stamps
        verdicts = np.empty(rows, dtype=object)
        verdicts[: len(self.verdicts)] = self.verdicts
        self.stamps, self.verdicts = stamps, verdicts


class RejectionCache:
    """Rejections per request shape and row, reused while the row's stamp is unchanged."""

    def __init__(self, shapes: int = DEFAULT_SHAPES) -> None:
        if shapes < 1:
            raise ValueError("a rejection cache must hold at least one shape")
        self._capacity = shapes
        self._shapes: OrderedDict[Hashable, _ShapeVerdicts] = OrderedDict()
        #: Rows answered from the cache, and rows explained afresh.
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        """Request shapes held."""
        return len(self._shapes)

    def clear(self) -> None:
        self._shapes.clear()

    def rejections(
        self,
        key: Hashable,
        epoch: Hashable,
        rows: IntVec,
        stamps: IntVec,
        explain: Explain,
    ) -> list[Rejection]:
        """One rejection per row of ``rows`` (in order), explaining (``explain``) only the
        rows whose stamp (``stamps``, indexed by row) moved since ``key`` last saw them.

        ``key`` must cover everything of the request that ``explain`` reads, and
        ``epoch`` everything index-wide it reads that no row stamp covers.
        """
        shape = self._shapes.get(key)
        if shape is None or shape.epoch != epoch:
            shape = _ShapeVerdicts(epoch, len(stamps))
            self._shapes[key] = shape
            while len(self._shapes) > self._capacity:
                self._shapes.popitem(last=False)
        else:
            shape.grow(len(stamps))
        self._shapes.move_to_end(key)
        now = stamps[rows]
        stale = shape.stamps[rows] != now
        missed = int(np.count_nonzero(stale))
        if missed:
            fresh_rows = rows[stale]
            fresh = np.empty(missed, dtype=object)
            fresh[:] = explain(fresh_rows)
            # A row named twice gets the same verdict twice: either write wins.
            shape.verdicts[fresh_rows] = fresh
            shape.stamps[fresh_rows] = now[stale]
        self.misses += missed
        self.hits += len(rows) - missed
        out: list[Rejection] = shape.verdicts[rows].tolist()
        return out
