"""docs/node-agent.md says what the agent does: its example file loads, its tables are whole."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from device_plugins.cli import FLAGS, app
from device_plugins.discovery import StaticBackend
from device_plugins.discovery.base import MODE_SHARED
from device_plugins.metrics import AgentMetrics, AgentView
from device_plugins.settings import DevicePluginSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "node-agent.md"
TEXT = DOC.read_text()
MARKER = "<!-- example: static device file -->"


def example() -> str:
    after = TEXT.split(MARKER, 1)[1]
    match = re.match(r"\s*```yaml\n(.*?)\n```", after, re.DOTALL)
    assert match, f"no yaml block after {MARKER}"
    return match.group(1)


def test_the_static_file_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(example())
    devices = StaticBackend(path).discover()
    assert [d.index for d in devices] == [0, 1, 2]
    assert [d.numa for d in devices] == [0, 1, None]
    assert [d.healthy for d in devices] == [True, True, False]
    assert {d.mode for d in devices} == {MODE_SHARED}
    assert devices[1].bus_id == "00000000:AF:00.0"
    result = CliRunner().invoke(
        app, ["--dry-run", "--discovery", "static", "--static-file", str(path)]
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("backend static: 3 device(s)\n")


def _table_rows(heading: str) -> list[list[str]]:
    section = TEXT.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_every_setting_is_in_the_table_with_its_flag_and_default() -> None:
    rows = {re.findall(r"`(VGPU_DP_\w+)`", row[0])[0]: row for row in _table_rows("Settings")}
    fields = DevicePluginSettings.model_fields
    assert set(rows) == {f"VGPU_DP_{name.upper()}" for name in fields}
    for name, info in fields.items():
        _, flag, default, _ = rows[f"VGPU_DP_{name.upper()}"]
        assert (flag == f"`--{name.replace('_', '-')}`") == (name in FLAGS), name
        if info.default not in (None, ""):
            documented = default.strip("`")
            if isinstance(info.default, tuple):
                assert documented == ",".join(map(str, info.default)), name
            elif isinstance(info.default, bool):
                assert documented == str(info.default).lower(), name
            elif isinstance(info.default, float):
                assert float(documented) == info.default, name
            else:
                assert documented == str(info.default), name


def test_every_metric_exported_is_documented() -> None:
    metrics = AgentMetrics()
    metrics.watch(AgentView(devices=tuple, registered=lambda: True, last_report=lambda: 0.0))
    types = re.findall(r"^# TYPE (\w+) ", metrics.exposition().decode(), re.MULTILINE)
    # prometheus_client adds a ``_created`` timestamp beside each counter and histogram.
    exported = {name for name in types if not name.endswith("_created")}
    documented = {row[0].strip("`") for row in _table_rows("Metrics and probes") if "_" in row[0]}
    documented -= {"/metrics", "/healthz", "/readyz"}
    assert documented == exported
