"""``vgpu-device-plugin``: dry run, bad settings, and a real run stopped by SIGTERM."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from device_plugins.agent import DevicePluginAgent
from device_plugins.cli import FLAGS, app, version
from device_plugins.settings import DevicePluginSettings
from tests.device_plugins.agent_process import (
    agent_process,
    clean_environment,
    kubeconfig,
)
from tests.device_plugins.conftest import NODE
from tests.device_plugins.pods_factory import CONFIG, GPU0, GPU1
from tests.support.apiserver import FakeApiServer

DEVICES_YAML = f"""
devices:
  - {{uuid: {GPU0}, index: 0, model: Tesla T4, memory_mib: 15360, numa: 0}}
  - {{uuid: {GPU1}, index: 1, model: Tesla T4, memory_mib: 15360, numa: 1, healthy: false}}
"""


@pytest.fixture
def device_file(tmp_path: Path) -> Path:
    path = tmp_path / "devices.yaml"
    path.write_text(DEVICES_YAML)
    return path


@pytest.fixture(autouse=True)
def no_agent_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)


def test_dry_run_prints_devices_and_annotation(device_file: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "--dry-run",
            "--discovery",
            "static",
            "--static-file",
            str(device_file),
            "--split-count",
            "4",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "backend static: 2 device(s)"
    assert f"#0 {GPU0} Tesla T4 15360 MiB numa=0 mode=hami-core healthy" in lines[1]
    assert "UNHEALTHY" in lines[2] and "split 4" in lines[2]
    assert lines[3].startswith(f'{CONFIG.register_annotation}=[{{"id":"{GPU0}","count":4,')
    assert '"type":"NVIDIA-Tesla T4"' in lines[3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--split-count", "0"], "split_count", id="split-zero"),
        pytest.param(["--resource-name", "gpu"], "resource_name", id="bad-resource"),
        pytest.param(["--discovery", "static"], "static_file", id="static-without-file"),
    ],
)
def test_bad_settings_exit_2_naming_the_field(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["--dry-run", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_an_invalid_static_file_exits_2_naming_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("devices: [{uuid: x}]")
    result = CliRunner().invoke(
        app, ["--dry-run", "--discovery", "static", "--static-file", str(bad)]
    )
    assert result.exit_code == 2
    assert "invalid device file" in result.stderr and "devices.0.index" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_run_needs_a_node_name(device_file: Path) -> None:
    result = CliRunner().invoke(app, ["--discovery", "static", "--static-file", str(device_file)])
    assert result.exit_code == 2
    assert "node name missing" in result.output


def test_serves_registers_and_stops_on_sigterm(
    kube_api: FakeApiServer, node: str, device_file: Path, short_dir: Path, tmp_path: Path
) -> None:
    with agent_process(
        short_dir,
        api_url=kube_api.url,
        folder=tmp_path,
        args=[
            *("--discovery", "static", "--static-file", str(device_file)),
            *("--hook-path", str(tmp_path / "hook")),
        ],
    ) as agent:
        registration = agent.kubelet.next_registration(timeout=30)
        assert registration.request.endpoint == "vgpu-nvidia.sock"
        listing = agent.kubelet.next_list()
        assert {d.health for d in listing.devices} == {"Healthy", "Unhealthy"}
        # The DaemonSet's probes: ready once registered and the annotation written.
        agent.wait_ready()
        assert agent.get("/healthz") == (200, "ok\n")
        status, metrics = agent.get("/metrics")
        assert status == 200 and "vgpu_device_plugin_kubelet_registered 1.0" in metrics
        output = agent.stop()
    assert agent.process.returncode == 0, output
    assert "signal 15: stopping" in output
    assert not (short_dir / "vgpu-nvidia.sock").exists()
    annotations = kube_api.get_node(NODE)["metadata"]["annotations"]
    assert f'"id":"{GPU1}","index":1,' in annotations[CONFIG.register_annotation]


def test_version() -> None:
    expected = f"vgpu-device-plugin {version()}\n"
    assert version() == metadata.version("vgpu-extender")
    # Eager: printed even beside a value that would not validate.
    for args in (["--version"], ["--version", "--split-count", "0"]):
        result = CliRunner().invoke(app, args)
        assert (result.exit_code, result.output) == (0, expected)
    script = subprocess.run(
        [sys.executable, "-m", "device_plugins", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert script.stdout == expected


def test_help_shows_every_default_and_no_type_tags() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    lines = {line.split()[0]: line for line in result.output.splitlines() if "  --" in line}
    for field in FLAGS:
        line = lines[f"--{field.replace('_', '-')}"]
        default = DevicePluginSettings.model_fields[field].default
        shown = "none" if default in (None, "") else str(default)
        assert line.endswith(f"[default: {shown}]"), line
        assert f"VGPU_DP_{field.upper()}" in line
    assert "--version" in lines and "--dry-run" in lines
    tags = {"TEXT", "INTEGER", "FLOAT", "PATH", "BOOLEAN", "<str>", "<int>", "<path>", "<bool>"}
    assert not tags & set(result.output.split()), result.output


def one_line(result: Result) -> str:
    """The single line a start-up failure prints."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vgpu-device-plugin: ")
    return lines[0]


def test_a_bad_flag_value_names_flag_variable_value_and_default() -> None:
    result = CliRunner().invoke(app, ["--dry-run", "--split-count", "0"])
    assert result.exit_code == 2
    line = one_line(result)
    assert "split_count (--split-count / VGPU_DP_SPLIT_COUNT) = 0" in line
    assert "greater than or equal to 1" in line and "(default 10)" in line


def test_a_bad_environment_value_is_named_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_DP_MEMORY_SCALING", "-1")
    monkeypatch.setenv("VGPU_DP_METRICS_ADDRESS", "9394")
    result = CliRunner().invoke(app, ["--dry-run"])
    assert result.exit_code == 2
    line = one_line(result)
    assert "memory_scaling (--memory-scaling / VGPU_DP_MEMORY_SCALING) = '-1'" in line
    assert "metrics_address (--metrics-address / VGPU_DP_METRICS_ADDRESS) = '9394'" in line


@pytest.mark.parametrize("problem", ["missing", "folder"])
def test_an_unusable_static_file_exits_2(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "devices.yaml"
    if problem == "folder":
        path.mkdir()
    result = CliRunner().invoke(
        app, ["--dry-run", "--discovery", "static", "--static-file", str(path)]
    )
    assert result.exit_code == 2
    line = one_line(result)
    assert "static_file (--static-file / VGPU_DP_STATIC_FILE)" in line
    assert repr(str(path)) in line
    assert "docs/node-agent.md" in line or "cannot read" in line


def test_a_missing_kubeconfig_exits_2(device_file: Path, tmp_path: Path) -> None:
    missing = tmp_path / "kubeconfig"
    result = CliRunner().invoke(
        app,
        ["--node-name", NODE, "--discovery", "static", "--static-file", str(device_file),
         "--kubeconfig", str(missing)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "kubeconfig (--kubeconfig / VGPU_DP_KUBECONFIG)" in one_line(result)


def _run_args(device_file: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--node-name", NODE, "--discovery", "static", "--static-file", str(device_file),
        "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")),
        "--device-plugin-dir", str(tmp_path / "dp"), *extra,
    ]  # fmt: skip


def test_a_taken_metrics_address_exits_2(device_file: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = CliRunner().invoke(
            app, _run_args(device_file, tmp_path, "--metrics-address", address)
        )
    assert result.exit_code == 2
    line = one_line(result)
    assert f"cannot serve metrics on {address!r} (VGPU_DP_METRICS_ADDRESS" in line


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_error_is_one_line_unless_debugging(
    device_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    def boom(self: DevicePluginAgent) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(DevicePluginAgent, "run", boom)
    logs: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logs.append  # type: ignore[method-assign]
    logging.getLogger("device_plugins").addHandler(handler)
    try:
        level = ["--log-level", "DEBUG" if debug else "INFO"]
        result = CliRunner().invoke(app, _run_args(device_file, tmp_path, *level))
    finally:
        logging.getLogger("device_plugins").removeHandler(handler)
    assert result.exit_code == 1
    line = one_line(result) if not debug else result.stderr.splitlines()[-1]
    assert line.endswith(
        "stopped by an unexpected error: RuntimeError: disk on fire "
        "(--log-level DEBUG shows the traceback)"
    )
    tracebacks = [r for r in logs if r.exc_info]
    assert len(tracebacks) == (1 if debug else 0)
