"""From per-arrival counters to the paper's curves, binned exactly as its merge scripts do.

After every arrival (placed, failed or CPU-only) the replay logs the GPU milli arrived so
far and the GPU milli allocated. Per run (fgd.md §5):

- ``arr% = round(arrived / gpus / 10)``, Python's ``round`` (an integer);
- ``alloc% = round(used / gpus / 10, 2)``;
- the value at x is the mean alloc% over the events with arr% = x; with none, over the
  events with arr% in [x-1, x+1]; rounded to 2 decimals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: The arrived percentages the report shows (the paper's Figs 9-14 read these).
REPORT_POINTS = (80, 90, 100, 110, 120, 130)


def bins(
    arrived: Sequence[int], used: Sequence[int], gpus: int, *, last: int = 130
) -> dict[int, float | None]:
    """alloc% per arrived% for x = 0..last (None where no event is near x)."""
    if len(arrived) != len(used):
        raise ValueError(f"arrived and used differ in length: {len(arrived)} != {len(used)}")
    if gpus <= 0:
        raise ValueError(f"gpus must be positive: {gpus!r}")
    by_x: dict[int, list[float]] = {}
    for a, u in zip(arrived, used, strict=True):
        by_x.setdefault(round(a / gpus / 10), []).append(round(u / gpus / 10, 2))
    out: dict[int, float | None] = {}
    for x in range(last + 1):
        values = by_x.get(x)
        if not values:
            values = [v for near in (x - 1, x, x + 1) for v in by_x.get(near, ())]
        out[x] = round(sum(values) / len(values), 2) if values else None
    return out


def at_points(
    curve: Mapping[int, float | None], points: Sequence[int] = REPORT_POINTS
) -> dict[int, float | None]:
    return {x: curve.get(x) for x in points}
