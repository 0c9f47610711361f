"""How long the command lines take to answer, each run a fresh process as a user's is.

Cases (the median of N runs, after two warm-up runs that fill the OS's file cache):

- ``python -c pass``: the interpreter alone, the floor every case pays;
- ``kubectl-vgpu --help`` and ``kubectl-vgpu --version``: the plugin's parser only;
- ``kubectl-vgpu top`` against a port where nothing listens: the plugin's whole fixed
  cost (httpx imported, a connection tried and refused, one line printed);
- ``vgpu-extender --help``: the extender's own command line.

The goal is that the plugin answers well under a second; ``--help`` should cost little
more than the interpreter.

Run: ``python -m benchmarks.cli_startup [--json PATH] [--quick] [--runs N]``
(``--quick``: 5 runs per case).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (
    argument_parser,
    cpu_gauge_ms,
    measure,
    median,
    percentile,
    print_table,
    write_json,
)

GOAL_MS = 1000.0


def script(name: str) -> str | None:
    """The console script installed beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed again on return: nothing listens there


def cases() -> list[tuple[str, list[str] | None]]:
    plugin = script("kubectl-vgpu")
    extender = script("vgpu-extender")
    refused = f"http://127.0.0.1:{_closed_port()}"
    return [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("kubectl-vgpu --help", None if plugin is None else [plugin, "--help"]),
        ("kubectl-vgpu --version", None if plugin is None else [plugin, "--version"]),
        (
            "kubectl-vgpu top (refused)",
            None if plugin is None else [plugin, "top", "--server", refused],
        ),
        ("vgpu-extender --help", None if extender is None else [extender, "--help"]),
    ]


def _runner(command: list[str]) -> Callable[[int], None]:
    def run(_i: int) -> None:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argument_parser(__doc__.splitlines()[0] if __doc__ else "cli_startup")
    parser.add_argument("--runs", type=int, default=None, metavar="N", help="runs per case")
    options = parser.parse_args(argv)
    runs = options.runs or (5 if options.quick else 21)
    results: list[dict[str, Any]] = []
    rows: list[list[object]] = []
    for case, command in cases():
        if command is None:
            print(f"{case}: not installed (pip install -e .), skipped", file=sys.stderr)
            continue
        samples = measure(_runner(command), repeat=runs, warmup=2, budget_s=120.0)
        row = {
            "case": case,
            "runs": len(samples),
            "median_ms": round(median(samples), 1),
            "p90_ms": round(percentile(samples, 90.0), 1),
            "min_ms": round(min(samples), 1),
            "goal_ms": GOAL_MS,
        }
        results.append(row)
        rows.append([case, row["runs"], row["median_ms"], row["p90_ms"], row["min_ms"]])
    gauge = cpu_gauge_ms()
    print_table(
        f"command-line start-up, a fresh process per run (cpu gauge {gauge} ms)",
        ["case", "runs", "median ms", "p90 ms", "min ms"],
        rows,
    )
    for row in results:
        row["cpu_gauge_ms"] = gauge
    write_json(options.json, "cli_startup", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
