"""``vgpu-extender simulate``: replay the openb GPU trace and compare with the FGD paper.

  vgpu-extender simulate --nodes DATA/openb_node_list_gpu_node.csv \\
      --pods DATA/openb_pod_list_default.csv --arrivals DATA/arrival_orders.csv.gz \\
      --seed 42 --policy fragmentation,binpack --json out.json --plot out.png

The paper's tie-break ranks and published numbers are found next to the given files
(``node_tiebreak_ranks.csv.gz`` beside the arrivals, ``expected/`` beside the nodes) unless
named with ``--ranks`` and ``--expected``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# The replay's modules (NumPy, the policies, rich's progress) load when the command runs,
# not when the CLI starts: every ``vgpu-extender --help`` would pay for them.
if TYPE_CHECKING:
    from vgpu_extender.policies.typical_pods import WeightedShape
    from vgpu_extender.sim.replay import ReplayResult, Workload
    from vgpu_extender.sim.report import PolicyRun

RANKS_FILE = "node_tiebreak_ranks.csv.gz"
EXPECTED_DIR = "expected"
#: Arrivals between two progress bar updates.
PROGRESS_STEP = 100


def _policies(value: str) -> list[str]:
    from vgpu_extender.policies import BUILTIN
    from vgpu_extender.sim.replay import SIM_POLICIES

    names = [p.strip() for p in value.split(",") if p.strip()]
    known = {**BUILTIN, **SIM_POLICIES}
    unknown = [p for p in names if p not in known]
    if not names or unknown:
        raise typer.BadParameter(
            f"unknown policy {', '.join(unknown) or repr(value)}; known: {', '.join(sorted(known))}"
        )
    return names


def _typical(value: str) -> str | tuple[WeightedShape, ...]:
    from vgpu_extender.policies.typical_pods import shapes_from_json
    from vgpu_extender.sim.replay import TYPICAL_SOURCES

    if value in TYPICAL_SOURCES:
        return value
    path = Path(value)
    try:
        return shapes_from_json(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise typer.BadParameter(f"typical pods file {value!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise typer.BadParameter(f"typical pods file {value!r}: {exc}") from None


def _beside(given: Path | None, anchor: Path | None, name: str) -> Path | None:
    if given is not None:
        return given
    if anchor is None:
        return None
    candidate = anchor.parent / name
    return candidate if candidate.exists() else None


def simulate(
    nodes: Annotated[Path, typer.Option(help="GPU node list CSV (openb_node_list_gpu_node.csv).")],
    pods: Annotated[Path, typer.Option(help="Pod list CSV (openb_pod_list_<trace>.csv).")],
    seed: Annotated[int, typer.Option(help="Seed: selects the paper's arrival order and ranks.")],
    policy: Annotated[
        str, typer.Option(help="Policies to replay, comma-separated (e.g. fragmentation,binpack).")
    ] = "fragmentation",
    arrivals: Annotated[
        Path | None,
        typer.Option(help="arrival_orders.csv.gz; without it an order is drawn from the seed."),
    ] = None,
    ranks: Annotated[
        Path | None, typer.Option(help=f"Tie-break ranks (default: {RANKS_FILE} beside arrivals).")
    ] = None,
    expected: Annotated[
        Path | None,
        typer.Option(help=f"The paper's numbers (default: {EXPECTED_DIR}/ beside the nodes)."),
    ] = None,
    trace: Annotated[
        str | None, typer.Option(help="Trace name (default: from the pod list's file name).")
    ] = None,
    typical: Annotated[
        str,
        typer.Option(help="Typical pods for fragmentation: trace, learn, or a JSON file."),
    ] = "trace",
    limit: Annotated[
        int | None, typer.Option(min=1, help="Replay only the first N arrivals.")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the results here.")
    ] = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Draw allocation vs arrived here (PNG).")
    ] = None,
    via_http: Annotated[
        str | None,
        typer.Option(help="Drive a running extender at this URL prefix instead of the engine."),
    ] = None,
    weight: Annotated[int, typer.Option(min=1, help="The extender's weight (--via-http).")] = 1,
    write_inventory: Annotated[
        Path | None,
        typer.Option(help="Write the trace's nodes as an inventory file for serve, and exit."),
    ] = None,
) -> None:
    """Replay the trace: GPU allocation at 80..130 % arrived, beside the paper's numbers."""
    from rich.console import Console

    from vgpu_extender.sim.expected import PaperNumbers, load_paper
    from vgpu_extender.sim.replay import load_workload
    from vgpu_extender.sim.report import PLOT_NEEDS, Report, can_plot, plot, print_report
    from vgpu_extender.sim.trace import TraceError

    console = Console(width=None if sys.stdout.isatty() else 160)
    if plot_path is not None and not can_plot():
        # Before the replay: finding out after minutes of it would waste them.
        console.print(PLOT_NEEDS, markup=False, highlight=False)
        raise typer.Exit(2)
    names = _policies(policy)
    shapes = _typical(typical)
    try:
        workload = load_workload(
            nodes,
            pods,
            seed=seed,
            arrivals_csv=arrivals,
            ranks_csv=_beside(ranks, arrivals, RANKS_FILE),
            limit=limit,
            trace=trace,
        )
    except TraceError as exc:
        console.print(f"[red]cannot read the trace:[/red] {exc}")
        raise typer.Exit(2) from None
    if write_inventory is not None:
        _write_inventory(workload, write_inventory)
        console.print(f"wrote {len(workload.nodes)} nodes to {write_inventory}")
        return
    if via_http is None:
        runs = [_run(workload, name, shapes, None, weight) for name in names]
    else:  # the extender runs whatever policy it was started with, and keeps its pods
        runs = [_run(workload, "extender", shapes, via_http, weight)]
    expected_dir = _beside(expected, nodes, EXPECTED_DIR)
    report = Report(
        trace=workload.trace,
        seed=seed,
        gpus=workload.gpus,
        arrivals=len(workload.order),
        runs=tuple(runs),
        paper=(
            load_paper(expected_dir, workload.trace, seed)
            if expected_dir is not None
            else PaperNumbers(workload.trace)
        ),
    )
    print_report(report, console)
    if json_path is not None:
        report.write_json(json_path)
    if plot_path is not None:
        plot(report, plot_path)


def _run(
    workload: Workload,
    policy: str,
    shapes: str | tuple[WeightedShape, ...],
    via_http: str | None,
    weight: int,
) -> PolicyRun:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from vgpu_extender.sim.replay import replay
    from vgpu_extender.sim.report import PolicyRun

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as progress:
        task = progress.add_task(policy, total=len(workload.order))

        def advance(done: int) -> None:
            if done % PROGRESS_STEP == 0 or done == len(workload.order):
                progress.update(task, completed=done)

        result: ReplayResult
        if via_http is None:
            result = replay(workload, policy, typical=shapes, on_arrival=advance)
            via = "engine"
        else:
            result = _replay_http(workload, via_http, weight, advance)
            via = "http"
    return PolicyRun(
        policy=policy,
        curve=result.curve(),
        placed=result.placed,
        failed=result.failed,
        seconds=result.seconds,
        via=via,
    )


def _replay_http(
    workload: Workload, url: str, weight: int, advance: Callable[[int], None]
) -> ReplayResult:
    import httpx
    from rich.console import Console

    from vgpu_extender.sim.http_driver import ExtenderClient, ExtenderError, replay_http

    try:
        with httpx.Client(timeout=30.0) as client:
            return replay_http(
                workload, ExtenderClient(client, url), weight=weight, on_arrival=advance
            )
    except (httpx.HTTPError, ExtenderError) as exc:
        Console().print(f"[red]extender at {url}:[/red] {exc}")
        raise typer.Exit(1) from None


def _write_inventory(workload: Workload, path: Path) -> None:
    from vgpu_extender.sim.http_driver import write_inventory
    from vgpu_extender.vendors.registry import create_vendor

    write_inventory(workload, path, create_vendor("nvidia").encode_inventory)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to the CLI."""
    app.command(name="simulate")(simulate)
