"""``vgpu-device-plugin`` in the Ascend flavour: dry runs from npu-smi and a static file,
and its start-up errors, each one line."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from device_plugins.cli import app
from tests.device_plugins.agent_process import (
    agent_process,
    clean_environment,
)
from tests.device_plugins.ascend.support import FIXTURES
from tests.device_plugins.conftest import NODE
from tests.support.apiserver import FakeApiServer


@pytest.fixture(autouse=True)
def no_agent_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)


@pytest.fixture
def npu_smi(tmp_path: Path) -> Path:
    """A stand-in npu-smi that prints the recorded 310P node."""
    script = tmp_path / "npu-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = "-m" ]; then cat {FIXTURES}/310p-info-m.txt; '
        f"else cat {FIXTURES}/310p-info.txt; fi\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_dry_run_from_npu_smi(npu_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_DP_ASCEND_NPU_SMI", str(npu_smi))
    result = CliRunner().invoke(app, ["--dry-run", "--discovery", "npu-smi", "--node-name", "n1"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "backend npu-smi: 4 chip(s) 310P3 -> Ascend310P, resource huawei.com/Ascend310P, "
        "7 vNPU(s) each, hami-vnpu-core false"
    )
    assert lines[3].startswith("  #2 n1-npu-2 physical 2 logic 2 310P3 UNHEALTHY -> count 7")
    assert lines[5].startswith('hami.io/node-register-Ascend310P=[{"id":"n1-npu-0","count":7,')
    assert lines[6] == "hami-vnpu-core=false"
    assert lines[7].startswith("hami.io/node-handshake-Ascend310P=Reported_")


def test_a_resource_name_given_wins_over_the_chips(
    npu_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VGPU_DP_ASCEND_NPU_SMI", str(npu_smi))
    monkeypatch.setenv("VGPU_DP_RESOURCE_NAME", "huawei.com/Ascend310P-pool")
    result = CliRunner().invoke(app, ["--dry-run", "--discovery", "npu-smi"])
    assert result.exit_code == 0, result.output
    assert "resource huawei.com/Ascend310P-pool," in result.output.splitlines()[0]


def test_dry_run_from_a_static_chip_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chips = tmp_path / "chips.yaml"
    chips.write_text("chips:\n  - {uuid: die-0, chip_name: 910B3, physical_id: 4}\n")
    monkeypatch.setenv("VGPU_DP_ASCEND_HAMI_VNPU_CORE", "true")
    monkeypatch.setenv("VGPU_DP_ASCEND_VDEVICE_COUNT", "10")
    result = CliRunner().invoke(
        app, ["--dry-run", "--discovery", "ascend-static", "--static-file", str(chips)]
    )
    assert result.exit_code == 0, result.output
    assert "10 vNPU(s) each, hami-vnpu-core true" in result.output
    assert '[{"id":"die-0","count":10,"devmem":65536,"devcore":100,' in result.output


@pytest.mark.parametrize(
    ("env", "args", "status", "message"),
    [
        (
            {"VGPU_DP_ASCEND_NPU_SMI": "/nonexistent/npu-smi"},
            ["--discovery", "npu-smi"],
            1,
            "discovery failed: '/nonexistent/npu-smi' not found",
        ),
        (
            {"VGPU_DP_ASCEND_VDEVICE_COUNT": "-1"},
            ["--discovery", "npu-smi"],
            2,
            "invalid Ascend settings: VGPU_DP_ASCEND_VDEVICE_COUNT = '-1'",
        ),
        ({}, ["--discovery", "ascend-static"], 2, "needs static_file"),
    ],
)
def test_start_up_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    args: list[str],
    status: int,
    message: str,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(app, ["--dry-run", *args])
    assert result.exit_code == status, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_bad_static_chip_file_is_refused_at_start(tmp_path: Path) -> None:
    chips = tmp_path / "chips.yaml"
    chips.write_text("chips: [{uuid: a, chip_name: 910B3}]\n")
    result = CliRunner().invoke(
        app, ["--dry-run", "--discovery", "ascend-static", "--static-file", str(chips)]
    )
    assert result.exit_code == 2
    assert "invalid chip file" in result.output and "physical_id" in result.output


def test_a_run_needs_a_node_name(npu_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_DP_ASCEND_NPU_SMI", str(npu_smi))
    result = CliRunner().invoke(app, ["--discovery", "npu-smi"])
    assert result.exit_code == 2
    assert "node name missing" in result.output


def test_serves_the_chips_registers_the_node_and_stops_on_sigterm(
    kube_api: FakeApiServer, node: str, npu_smi: Path, short_dir: Path, tmp_path: Path
) -> None:
    with agent_process(
        short_dir,
        api_url=kube_api.url,
        folder=tmp_path,
        env={"VGPU_DP_DISCOVERY": "npu-smi", "VGPU_DP_ASCEND_NPU_SMI": str(npu_smi)},
    ) as agent:
        registration = agent.kubelet.next_registration(timeout=30)
        assert (registration.request.resource_name, registration.request.endpoint) == (
            "huawei.com/Ascend310P",
            "Ascend310P.sock",
        )
        assert len(agent.kubelet.next_list().devices) == 4 * 7
        agent.wait_ready()
        output = agent.stop()
    assert agent.process.returncode == 0, output
    assert not (short_dir / "Ascend310P.sock").exists()
    annotations = kube_api.get_node(NODE)["metadata"]["annotations"]
    assert annotations["hami.io/node-register-Ascend310P"].startswith('[{"id":"node-a-npu-0",')
    assert annotations["hami-vnpu-core"] == "false"
    assert annotations["hami.io/node-handshake-Ascend310P"].startswith("Reported_")
