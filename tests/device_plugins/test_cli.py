"""``vgpu-device-plugin``: dry run, bad settings, and a real run stopped by SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from device_plugins.cli import app
from tests.device_plugins.conftest import NODE
from tests.device_plugins.kubelet import FakeKubelet
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
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("VGPU_DP_") or key == "NODE_NAME":
            monkeypatch.delenv(key)
    monkeypatch.setenv("VGPU_DP_METRICS_ADDRESS", "127.0.0.1:0")


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


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: t, user: {}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
    )
    return path


def test_serves_registers_and_stops_on_sigterm(
    kube_api: FakeApiServer, node: str, device_file: Path, short_dir: Path, tmp_path: Path
) -> None:
    kubelet = FakeKubelet(short_dir).start()
    env = {
        **os.environ,
        "NODE_NAME": NODE,
        "NO_PROXY": "127.0.0.1",
        "VGPU_DP_RETRY_INTERVAL_S": "0.1",
        "VGPU_DP_KUBELET_WATCH_INTERVAL_S": "0.05",
    }
    command = [
        sys.executable,
        "-m",
        "device_plugins",
        "--device-plugin-dir",
        str(short_dir),
        "--discovery",
        "static",
        "--static-file",
        str(device_file),
        "--kubeconfig",
        str(kubeconfig(tmp_path / "kubeconfig", kube_api.url)),
        "--hook-path",
        str(tmp_path / "hook"),
    ]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        registration = kubelet.next_registration(timeout=30)
        assert registration.request.endpoint == "vgpu-nvidia.sock"
        listing = kubelet.next_list()
        assert {d.health for d in listing.devices} == {"Healthy", "Unhealthy"}
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        kubelet.stop()
    assert process.returncode == 0, output
    assert "signal 15: stopping" in output
    assert not (short_dir / "vgpu-nvidia.sock").exists()
    annotations = kube_api.get_node(NODE)["metadata"]["annotations"]
    assert f'"id":"{GPU1}","index":1,' in annotations[CONFIG.register_annotation]
