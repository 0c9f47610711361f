"""Turning a policy's raw node scores into kube-scheduler's extender scale."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: kube-scheduler's MaxExtenderPriority: extender scores run 0..10.
MAX_EXTENDER_PRIORITY = 10


def extender_score_vector(raw: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Min-max scale raw scores (higher is better) to integers 0..10, as a vector.

    Equal raw scores all get the maximum: none is preferred. NaN (and -inf) counts as
    the worst: it scores 0, and the finite scores are scaled to 1..10 beside it, so the
    lowest scored node still ranks above one with no score (an unlabelled node under
    label priority).
    """
    values = np.asarray(raw, dtype=np.float64)
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    if np.isfinite(values).all():  # the usual case: no masking, no copies
        low, high = float(values.min()), float(values.max())
        if high <= low:
            return np.full(len(values), MAX_EXTENDER_PRIORITY, dtype=np.int64)
        scores: npt.NDArray[np.int64] = np.rint(
            (values - low) * MAX_EXTENDER_PRIORITY / (high - low)
        ).astype(np.int64)
        return scores
    values = np.where(np.isnan(values), -np.inf, values)  # infinities stay infinite
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(len(values), dtype=np.int64)
    lo, hi = float(values[finite].min()), float(values[finite].max())
    if hi <= lo:
        return np.where(finite, MAX_EXTENDER_PRIORITY, 0).astype(np.int64)
    worst = values == -np.inf
    floor = 1 if worst.any() else 0
    clipped = np.clip(values, lo, hi)
    scaled: npt.NDArray[np.int64] = np.rint(
        floor + (clipped - lo) * (MAX_EXTENDER_PRIORITY - floor) / (hi - lo)
    ).astype(np.int64)
    scaled[worst] = 0
    return scaled


def to_extender_scores(raw: npt.NDArray[np.float64]) -> list[int]:
    """``extender_score_vector`` as a list of ints."""
    scores: list[int] = extender_score_vector(raw).tolist()
    return scores
