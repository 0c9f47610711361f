"""Settings from the environment, and clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from device_plugins.discovery import NvmlBackend, StaticBackend, make_backend
from device_plugins.settings import DevicePluginSettings


def test_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NODE_NAME", "node-from-downward-api")
    monkeypatch.setenv("VGPU_DP_SPLIT_COUNT", "4")
    monkeypatch.setenv("VGPU_DP_IGNORED_XIDS", "13, 31")
    monkeypatch.setenv("VGPU_DP_DISCOVERY", "static")
    monkeypatch.setenv("VGPU_DP_STATIC_FILE", str(tmp_path / "d.yaml"))
    settings = DevicePluginSettings()
    assert settings.node_name == "node-from-downward-api"
    assert settings.split_count == 4
    assert settings.ignored_xids == (13, 31)
    assert settings.plugin_socket == Path("/var/lib/kubelet/device-plugins/vgpu-nvidia.sock")
    assert isinstance(make_backend(settings), StaticBackend)


def test_defaults_pick_nvml() -> None:
    settings = DevicePluginSettings()
    assert settings.ignored_xids == (13, 31, 43, 45, 68, 109)
    assert isinstance(make_backend(settings), NvmlBackend)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"split_count": 0}, "split_count", id="split-zero"),
        pytest.param({"memory_scaling": -1}, "memory_scaling", id="negative-scaling"),
        pytest.param({"resource_name": "gpu"}, "extended resource.*'gpu'", id="no-domain"),
        pytest.param(
            {"resource_name": "kubernetes.io/gpu"}, "extended resource", id="reserved-domain"
        ),
        pytest.param({"socket_name": "a/b.sock"}, "plain file name.*'a/b.sock'", id="socket-path"),
        pytest.param({"discovery": "static"}, "needs static_file", id="static-without-file"),
        pytest.param({"discovery": "cuda"}, "discovery", id="unknown-backend"),
        pytest.param({"ignored_xids": "13,x"}, "comma-separated integers.*'13,x'", id="bad-xids"),
        pytest.param({"device_plugin_dir": "/" + "d" * 120}, "longer than 107", id="long-path"),
    ],
)
def test_bad_values_name_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DevicePluginSettings(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "level"), [("debug", "DEBUG"), ("Warn", "WARNING"), ("ERROR", "ERROR")]
)
def test_the_log_level_is_taken_in_any_case(given: str, level: str) -> None:
    assert DevicePluginSettings(log_level=given).log_level == level
