"""Which pods arrive, in what order, and how ties between nodes are broken (fgd.md §3-§4).

The paper's per-seed sequences and node ranks are published as ``arrival_orders.csv.gz``
(``trace, seed, arrival_idx, source_row, is_copy``) and ``node_tiebreak_ranks.csv.gz``
(``trace, seed, node, tiebreak_rank``); the gpuspec traces use the default trace's. Without
them a sequence is drawn the same way (shuffle, then resample the original trace to the
target share of GPU capacity), but from NumPy's generator, so it is not the paper's.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from vgpu_extender.sim.trace import TraceError, TracePod

#: Traces that reuse another trace's arrival order and ranks (by name prefix).
ORDER_SOURCE = {"gpuspec": "default"}
#: The paper inflates every trace to 130 % of GPU capacity.
DEFAULT_TARGET = 1.3


def order_trace(trace: str) -> str:
    """The trace whose published order and ranks ``trace`` uses."""
    for prefix, source in ORDER_SOURCE.items():
        if trace.startswith(prefix):
            return source
    return trace


def read_arrivals(path: Path, trace: str, seed: int) -> list[int]:
    """Source rows (0-based rows of the pod list) in arrival order."""
    source = order_trace(trace)
    found = [
        (_int(row, "arrival_idx", path, line), _int(row, "source_row", path, line))
        for line, row in _matching(path, source, seed)
    ]
    if not found:
        raise TraceError(f"{path}: no arrivals for trace {source!r} and seed {seed}")
    found.sort()
    return [row for _, row in found]


def read_ranks(path: Path, trace: str, seed: int) -> dict[str, int]:
    """Node name -> tie-break rank (the smallest rank wins a tie)."""
    source = order_trace(trace)
    ranks = {
        row["node"]: _int(row, "tiebreak_rank", path, line)
        for line, row in _matching(path, source, seed)
    }
    if not ranks:
        raise TraceError(f"{path}: no tie-break ranks for trace {source!r} and seed {seed}")
    return ranks


def drawn_arrivals(
    pods: Sequence[TracePod], seed: int, capacity_milli: int, target: float = DEFAULT_TARGET
) -> list[int]:
    """A sequence drawn like the paper's: the trace shuffled, then copies of uniformly drawn
    pods appended until one more would pass ``target`` x capacity (or, above it, random
    pods removed until the total fits)."""
    rng = np.random.default_rng(seed)
    order = [int(i) for i in rng.permutation(len(pods))]
    goal = target * capacity_milli
    total = sum(p.gpu_request for p in pods)
    if total > goal:
        while total > goal and order:
            victim = int(rng.integers(len(order)))
            total -= pods[order.pop(victim)].gpu_request
        return order
    while True:
        pick = int(rng.integers(len(pods)))
        if total + pods[pick].gpu_milli > goal:
            return order
        order.append(pick)
        total += pods[pick].gpu_request


def drawn_ranks(names: Sequence[str], seed: int) -> dict[str, int]:
    """A random rank per node (name order permuted), for when none are published."""
    perm = np.random.default_rng(seed).permutation(len(names))
    return {name: int(rank) for name, rank in zip(sorted(names), perm, strict=True)}


def _matching(path: Path, trace: str, seed: int) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows whose leading ``trace`` and ``seed`` columns match. The files hold every trace
    and seed (half a million rows), so rows are matched on their raw text first and only
    the matches are parsed."""
    opener = gzip.open if path.suffix == ".gz" else open
    prefix = f"{trace},{seed},"
    try:
        with opener(path, "rt", newline="") as handle:
            header = next(csv.reader([handle.readline()]), [])
            if header[:2] != ["trace", "seed"]:
                raise TraceError(f"{path}: expected columns trace, seed first, got {header[:2]}")
            for line, text in enumerate(handle, start=2):
                if text.startswith(prefix):
                    values = next(csv.reader([text]))
                    yield line, dict(zip(header, values, strict=False))
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None


def _int(row: dict[str, str], key: str, path: Path, line: int) -> int:
    value = row.get(key)
    try:
        return int(value or "")
    except ValueError:
        raise TraceError(f"{path}:{line}: field {key!r} is not an integer: {value!r}") from None
