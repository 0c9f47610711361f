"""Per-row verdicts as columns of integer codes, turned into ``Rejection`` objects once.

Explaining thousands of rejected nodes one ``Rejection`` at a time would cost more than
the fit itself; instead each verdict is a row of codes (reason, numbers, detail), equal
rows are found with one sort, and each distinct verdict becomes one shared object.
"""

from __future__ import annotations

import numpy as np

from vgpu_extender.domain import Reason, Rejection
from vgpu_extender.engine.columns import IntVec

_REASONS = list(Reason)
_CODE = {reason: code for code, reason in enumerate(_REASONS)}
#: A row not judged yet, or a verdict without numbers.
UNSET = -1
_MAX_RADIX = 2**62


class Verdicts:
    """Per-row verdicts as columns of codes, turned into ``Rejection`` objects at the end."""

    def __init__(self, n: int) -> None:
        self.reason = np.full(n, UNSET, dtype=np.int64)
        self.need = np.full(n, UNSET, dtype=np.int64)
        self.have = np.full(n, UNSET, dtype=np.int64)
        self.unresolvable = np.zeros(n, dtype=np.int64)
        self.detail = np.zeros(n, dtype=np.int64)
        self.details: dict[str, int] = {"": 0}

    def detail_code(self, text: str) -> int:
        return self.details.setdefault(text, len(self.details))

    def set(
        self,
        where: IntVec,
        reason: Reason | IntVec,
        need: int | IntVec = UNSET,
        have: int | IntVec = UNSET,
        unresolvable: bool | np.ndarray = False,
        detail: int | IntVec = 0,
    ) -> None:
        if len(where) == 0:
            return
        self.reason[where] = _CODE[reason] if isinstance(reason, Reason) else reason
        self.need[where] = need
        self.have[where] = have
        self.unresolvable[where] = unresolvable
        self.detail[where] = detail

    def rejections(self) -> list[Rejection]:
        """One ``Rejection`` per row; rows with equal verdicts share one object."""
        if len(self.reason) == 0:
            return []
        columns = (self.reason, self.unresolvable, self.detail, self.need, self.have)
        code = np.zeros(len(self.reason), dtype=np.int64)
        radix = 1
        for column in columns:
            values, size = _dense(column)
            if radix * size >= _MAX_RADIX:  # re-number what is combined so far
                _, code = np.unique(code, return_inverse=True)
                code = code.reshape(-1)
                radix = int(code.max()) + 1
            code = code * size + values
            radix *= size
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        texts = list(self.details)
        objects = np.empty(len(first), dtype=object)
        keys = zip(*(column[first].tolist() for column in columns), strict=True)
        for i, (reason, unresolvable, detail, need, have) in enumerate(keys):
            objects[i] = Rejection(
                _REASONS[reason],
                None if need == UNSET else need,
                None if have == UNSET else have,
                unresolvable=bool(unresolvable),
                detail=texts[detail],
            )
        out: list[Rejection] = objects[inverse.reshape(-1)].tolist()
        return out


def _dense(column: IntVec) -> tuple[IntVec, int]:
    """Small non-negative codes for a column's values, and how many codes there can be."""
    lo, hi = int(column.min()), int(column.max())
    if hi - lo < len(column) + 64:
        return column - lo, hi - lo + 1
    _, inverse = np.unique(column, return_inverse=True)
    dense: IntVec = inverse.reshape(-1)
    return dense, int(dense.max()) + 1
