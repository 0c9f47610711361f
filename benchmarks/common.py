"""What every benchmark shares: timing, percentiles, the printed table and the JSON file."""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def argument_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--json PATH`` and ``--quick``; add your own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions (a smoke run, not a measurement)"
    )
    return parser


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    return argument_parser(description).parse_args(argv)


def add_nodes_option(parser: argparse.ArgumentParser, default: Sequence[int]) -> None:
    """``--nodes N [N ...]``: the cluster sizes to run (default: the benchmark's table)."""
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=list(default),
        metavar="N",
        help=f"cluster sizes (default: {' '.join(str(n) for n in default)})",
    )


def measure(
    run: Callable[[int], object], *, repeat: int, warmup: int = 3, budget_s: float = 60.0
) -> list[float]:
    """Wall time of ``run(i)`` in milliseconds, ``repeat`` times after ``warmup`` calls.

    ``i`` is the repetition number, so a run can rotate through prepared inputs. The
    garbage collector is paused while timing; the loop stops early once ``budget_s`` is
    spent (never before 5 samples), so slow reference loops stay bounded.
    """
    for i in range(warmup):
        run(i)
    samples: list[float] = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        deadline = time.perf_counter() + budget_s
        for i in range(repeat):
            start = time.perf_counter_ns()
            run(i)
            samples.append((time.perf_counter_ns() - start) / 1e6)
            if len(samples) >= 5 and time.perf_counter() > deadline:
                break
    finally:
        if enabled:
            gc.enable()
    return samples


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50.0)


def cpu_gauge_ms() -> float:
    """A fixed pure-Python workload's time (best of three), our code untouched: runs on
    different machines, or in a noisy hour of one, compare only next to it."""
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(1000.0 * best, 1)


def machine() -> dict[str, str]:
    """Where the numbers were taken (they mean little without it)."""
    return {"python": platform.python_version(), "machine": platform.machine()}


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(_cell(value) for value in row))
    console = Console()
    if not console.is_terminal:  # a log or a pipe: do not squeeze the columns
        console = Console(width=max(console.width, 120))
    console.print(table)


def write_json(path: Path | None, benchmark: str, results: list[dict[str, Any]]) -> None:
    """Write ``{"benchmark": ..., "machine": ..., "results": [...]}`` when a path is given."""
    if path is None:
        return
    payload = {"benchmark": benchmark, "machine": machine(), "results": results}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if value < 100 else f"{value:.1f}"
    return str(value)
