"""Per-row vectors derived from each row's own state, recomputed only where a row changed.

A node policy's score of a row often reads nothing but that row (HAMi's usage score
reads the row's sums). Prioritize asks for it over every candidate for every pod, while
a bind changes one row: remembering each row's value with the row's stamp (the index
version of its last change) leaves only the changed rows to compute again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from vgpu_extender.engine.columns import IntVec

if TYPE_CHECKING:
    from vgpu_extender.engine.index import ClusterIndex

FloatVec = npt.NDArray[np.float64]

#: Computes the vector's values for the given rows from the index.
RowCompute = Callable[["ClusterIndex", IntVec], FloatVec]

#: The stamp of a row never computed: below any real stamp (those start at 0).
_NEVER = -1


class _Held:
    __slots__ = ("stamps", "values")

    def __init__(self, size: int) -> None:
        self.values: FloatVec = np.zeros(size, dtype=np.float64)
        self.stamps: IntVec = np.full(size, _NEVER, dtype=np.int64)

    def grown(self, size: int) -> _Held:
        bigger = _Held(size)
        bigger.values[: len(self.values)] = self.values
        bigger.stamps[: len(self.stamps)] = self.stamps
        return bigger


class RowVectors:
    """Keyed per-row vectors; each key must always name the same computation."""

    def __init__(self) -> None:
        self._held: dict[Hashable, _Held] = {}

    def clear(self) -> None:
        """Forget every vector: the next reads compute every row."""
        self._held.clear()

    def vector(
        self, key: Hashable, index: ClusterIndex, stamps: IntVec, compute: RowCompute
    ) -> FloatVec:
        """The vector for the first ``len(stamps)`` rows, computing (``compute``) only
        the rows whose stamp moved since ``key`` last computed them. Read only: it is
        the remembered copy."""
        span = len(stamps)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held(span)
        elif len(held.values) < span:
            held = self._held[key] = held.grown(span)
        moved = np.flatnonzero(stamps != held.stamps[:span])
        if len(moved):
            held.values[moved] = compute(index, moved)
            held.stamps[moved] = stamps[moved]
        values = held.values[:span]
        values.flags.writeable = False
        return values
