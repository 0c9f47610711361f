"""What a simulation prints and writes: the table, the JSON document and the plot.

Our curves sit next to the paper's for the same trace and seed (and its 10-seed mean and
sd), at the arrived percentages the paper reports.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from vgpu_extender.sim.binning import REPORT_POINTS
from vgpu_extender.sim.expected import OURS_TO_PAPER, PaperNumbers


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's replay, reduced to what the report shows."""

    policy: str
    curve: dict[int, float | None]
    placed: int
    failed: int
    seconds: float
    via: str = "engine"

    def alloc(self) -> dict[str, float | None]:
        return {str(x): self.curve.get(x) for x in REPORT_POINTS}


@dataclass(frozen=True, slots=True)
class Report:
    trace: str
    seed: int
    gpus: int
    arrivals: int
    runs: tuple[PolicyRun, ...]
    paper: PaperNumbers

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "seed": self.seed,
            "gpus": self.gpus,
            "arrivals": self.arrivals,
            "results": [
                {
                    "policy": run.policy,
                    "alloc": run.alloc(),
                    "curve": {str(x): v for x, v in run.curve.items()},
                    "placed": run.placed,
                    "failed": run.failed,
                    "seconds": round(run.seconds, 2),
                    "via": run.via,
                }
                for run in self.runs
            ],
            "paper": self.paper.to_json(),
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(report: Report) -> Table:
    """GPU allocation % at each reported arrived %: ours, then the paper's."""
    out = Table(
        title=f"GPU allocation % by arrived % of capacity: trace {report.trace}, seed "
        f"{report.seed}, {report.gpus} GPUs, {report.arrivals} arrivals"
    )
    out.add_column("policy")
    out.add_column("source")
    for x in REPORT_POINTS:
        out.add_column(str(x), justify="right")
    out.add_column("placed / failed", justify="right")
    out.add_column("time", justify="right")
    for run in report.runs:
        out.add_row(
            run.policy,
            f"ours ({run.via})",
            *(_cell(run.curve.get(x)) for x in REPORT_POINTS),
            f"{run.placed} / {run.failed}",
            f"{run.seconds:.1f} s",
        )
    for policy, curve in report.paper.seed_curves.items():
        out.add_row(
            policy, f"paper, seed {report.seed}", *(_cell(curve.get(x)) for x in REPORT_POINTS)
        )
    for policy in _paper_policies_of(report.runs, report.paper):
        stats = report.paper.summary[policy]
        out.add_row(
            policy,
            "paper, 10-seed mean ± sd",
            *(f"{stats[x][0]:.2f}±{stats[x][1]:.2f}" if x in stats else "-" for x in REPORT_POINTS),
        )
    return out


def _paper_policies_of(runs: Sequence[PolicyRun], paper: PaperNumbers) -> list[str]:
    """The paper policies whose summary the table shows: FGD always, plus any we mirror."""
    wanted = ["FGD"] + [OURS_TO_PAPER[r.policy] for r in runs if r.policy in OURS_TO_PAPER]
    return [p for p in dict.fromkeys(wanted) if p in paper.summary]


def print_report(report: Report, console: Console) -> None:
    console.print(table(report))


#: What ``--plot`` says when matplotlib is missing (it is an extra, not a dependency).
PLOT_NEEDS = "--plot needs matplotlib: pip install 'vgpu-extender[plot]'"


def can_plot() -> bool:
    """Whether matplotlib can be imported (found, not imported: that takes a second)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def plot(report: Report, path: Path) -> None:
    """Allocation vs arrived for each policy, the paper's curves dashed beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    xs = list(range(0, 131))
    axes.plot(xs, [min(x, 100) for x in xs], color="lightgrey", label="ideal")
    for run in report.runs:
        points = [(x, v) for x, v in run.curve.items() if v is not None]
        axes.plot([p[0] for p in points], [p[1] for p in points], label=f"{run.policy} (ours)")
    for policy, curve in report.paper.seed_curves.items():
        points = sorted(curve.items())
        axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            linestyle="--",
            linewidth=1,
            label=f"{policy} (paper)",
        )
    axes.set_xlabel("arrived GPU request, % of capacity")
    axes.set_ylabel("GPU allocation, % of capacity")
    axes.set_title(f"openb {report.trace}, seed {report.seed}")
    axes.set_xlim(60, 130)
    axes.set_ylim(60, 100)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
