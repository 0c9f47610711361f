"""``simulate --plot`` without matplotlib names the extra to install, before any replay."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from vgpu_extender.sim import command, replay
from vgpu_extender.sim.report import can_plot


def _invoke(tmp_path: Path, *extra: str) -> tuple[int, str]:
    app = typer.Typer()
    command.register(app)
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    answer = CliRunner().invoke(
        app, ["--nodes", str(nodes), "--pods", str(pods), "--seed", "42", *extra]
    )
    return answer.exit_code, answer.output


def _no_replay(*_args: object, **_kw: object) -> object:
    raise AssertionError("the trace was read although --plot cannot be honoured")


def test_plot_without_matplotlib_names_the_extra_before_replaying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like
    monkeypatch.setattr(replay, "load_workload", _no_replay)
    assert not can_plot()
    code, output = _invoke(tmp_path, "--plot", str(tmp_path / "out.png"))
    assert code == 2, output
    assert output.strip() == "--plot needs matplotlib: pip install 'vgpu-extender[plot]'"
    assert "Traceback" not in output


def test_without_plot_a_missing_matplotlib_is_no_concern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, output = _invoke(tmp_path)  # the node list does not exist: the trace's own error
    assert code == 2 and "cannot read the trace" in output


def test_with_matplotlib_installed_plotting_is_possible() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (the plot extra) is not installed")
    assert can_plot()
