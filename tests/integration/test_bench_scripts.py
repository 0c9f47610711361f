"""Every benchmark runs as a script (``python benchmarks/X.py``), not only with ``-m``.

Run from another directory, with no ``PYTHONPATH``: the script itself must put the
repository root on the path (the guard before its project imports).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(
    path for path in BENCHMARKS.glob("*.py") if "\ndef main(" in path.read_text(encoding="utf-8")
)


def test_the_benchmarks_are_found() -> None:
    assert {"engine_fit", "memory", "extender_latency"} <= {p.stem for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_runs_as_a_script(script: Path, tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout.lower()
