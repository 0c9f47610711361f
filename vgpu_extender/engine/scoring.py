"""Turning a policy's raw node scores into kube-scheduler's extender scale."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: kube-scheduler's MaxExtenderPriority: extender scores run 0..10.
MAX_EXTENDER_PRIORITY = 10


def to_extender_scores(raw: npt.NDArray[np.float64]) -> list[int]:
    """Min-max scale raw scores (higher is better) to integers 0..10.

    Equal raw scores all get the maximum: none is preferred. NaN counts as the worst.
    """
    if len(raw) == 0:
        return []
    values = np.asarray(raw, dtype=np.float64)
    values = np.where(np.isnan(values), -np.inf, values)  # infinities stay infinite
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return [0] * len(values)
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        return [MAX_EXTENDER_PRIORITY if np.isfinite(v) else 0 for v in values]
    clipped = np.clip(values, lo, hi)
    scaled = np.rint((clipped - lo) * MAX_EXTENDER_PRIORITY / (hi - lo))
    result: list[int] = scaled.astype(np.int64).tolist()
    return result
