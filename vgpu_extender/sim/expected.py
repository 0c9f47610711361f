"""The paper's published numbers (``expected/`` of the openb data; fgd.md §7).

``analysis_allo_discrete.csv`` holds one curve per trace, policy and seed (alloc % at
arrived 0..130 %); ``summary.csv`` the mean and sample sd over seeds 42..51 at 80..130 %.
Policies are named as the paper names them (``Random``, ``DotProd``, ``GpuClustering``,
``GpuPacking``, ``BestFit``, ``FGD``); the file's ``06-`` ordering prefixes are dropped.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from vgpu_extender.sim.trace import TraceError

ALLOC_FILE = "analysis_allo_discrete.csv"
SUMMARY_FILE = "summary.csv"
#: Our policy that implements a paper policy.
OURS_TO_PAPER = {"fragmentation": "FGD"}


@dataclass(slots=True)
class PaperNumbers:
    """Per-seed curves and the 10-seed mean/sd, for one trace."""

    trace: str
    #: paper policy -> {x: alloc %} for the requested seed.
    seed_curves: dict[str, dict[int, float]] = field(default_factory=dict)
    #: paper policy -> {x: (mean, sd)} at 80..130.
    summary: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "seed": {p: {str(x): v for x, v in c.items()} for p, c in self.seed_curves.items()},
            "summary": {
                p: {str(x): {"mean": m, "sd": s} for x, (m, s) in c.items()}
                for p, c in self.summary.items()
            },
        }


def _policy(raw: str) -> str:
    head, _, tail = raw.partition("-")
    return tail if head.isdigit() and tail else raw


def load_paper(directory: Path, trace: str, seed: int | None) -> PaperNumbers:
    """The paper's numbers for ``trace`` (and ``seed``); empty where a file is absent."""
    numbers = PaperNumbers(trace)
    alloc = directory / ALLOC_FILE
    if alloc.is_file() and seed is not None:
        with alloc.open(newline="") as handle:
            for row in csv.DictReader(handle):
                workload = row["workload"].removeprefix("openb_pod_list_")
                if workload != trace or row["seed"] != str(seed):
                    continue
                curve = {int(k): float(v) for k, v in row.items() if k.isdigit() and v}
                numbers.seed_curves[_policy(row["sc_policy"])] = curve
    summary = directory / SUMMARY_FILE
    if summary.is_file():
        with summary.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row["trace"] != trace:
                    continue
                try:
                    numbers.summary[_policy(row["policy"])] = {
                        x: (float(row[f"alloc{x}_mean"]), float(row[f"alloc{x}_sd"]))
                        for x in (80, 90, 100, 110, 120, 130)
                    }
                except (KeyError, ValueError) as exc:
                    raise TraceError(
                        f"{summary}: bad row for {row.get('policy')!r}: {exc}"
                    ) from None
    return numbers
