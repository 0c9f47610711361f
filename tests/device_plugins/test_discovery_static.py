"""The static file backend and the in-memory fake: one contract, plus file errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from device_plugins.discovery import FakeBackend, StaticBackend
from device_plugins.discovery.base import (
    DiscoveryBackend,
    DiscoveryError,
    HealthEvent,
    PhysicalDevice,
)

GPU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"

YAML = f"""
devices:
  - uuid: {GPU1}
    index: 1
    model: Tesla V100-PCIE-32GB
    memory_mib: 32768
    numa: 1
  - uuid: {GPU0}
    index: 0
    model: Tesla V100-PCIE-32GB
    memory_mib: 32768
"""

EXPECTED = (
    PhysicalDevice(GPU0, 0, "Tesla V100-PCIE-32GB", 32768),
    PhysicalDevice(GPU1, 1, "Tesla V100-PCIE-32GB", 32768, numa=1),
)


def static_backend(tmp_path: Path) -> DiscoveryBackend:
    path = tmp_path / "devices.yaml"
    path.write_text(YAML)
    return StaticBackend(path)


def fake_backend(tmp_path: Path) -> DiscoveryBackend:
    return FakeBackend(reversed(EXPECTED))


@pytest.mark.parametrize("make", [static_backend, fake_backend], ids=["static", "fake"])
def test_contract_discover_sorted_and_watch_stops(tmp_path: Path, make: object) -> None:
    backend = make(tmp_path)  # type: ignore[operator]
    assert isinstance(backend, DiscoveryBackend)
    assert backend.discover() == EXPECTED
    stop = threading.Event()
    seen: list[HealthEvent] = []
    thread = threading.Thread(target=backend.watch_health, args=(stop, seen.append))
    thread.start()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert seen == []
    backend.close()


def test_json_list_form_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "devices.json"
    path.write_text(
        f'[{{"uuid": "{GPU0}", "index": 0, "model": "A10", "memory_mib": 24576, "healthy": false}}]'
    )
    (device,) = StaticBackend(path).discover()
    assert (device.uuid, device.memory_mib, device.healthy, device.numa) == (
        GPU0,
        24576,
        False,
        None,
    )


def test_file_is_read_again_on_each_discover(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(YAML)
    backend = StaticBackend(path)
    assert all(d.healthy for d in backend.discover())
    path.write_text(YAML.replace("numa: 1", "numa: 1\n    healthy: false"))
    assert [d.healthy for d in backend.discover()] == [True, False]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            YAML.replace("memory_mib: 32768\n    numa", "memory_mib: lots\n    numa"),
            r"devices\.0\.memory_mib.*'lots'",
            id="memory-not-a-number",
        ),
        pytest.param(
            YAML.replace("memory_mib: 32768\n    numa", "memory_mib: 0\n    numa"),
            r"devices\.0\.memory_mib.*greater than 0",
            id="memory-zero",
        ),
        pytest.param(
            YAML.replace(
                "    model: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n    numa: 1\n",
                "    memory_mib: 32768\n",
            ),
            r"devices\.0\.model.*Field required",
            id="model-missing",
        ),
        pytest.param(
            YAML.replace("index: 0", "index: 1"),
            r"devices\.1\.index 1 is repeated",
            id="index-repeated",
        ),
        pytest.param(
            YAML.replace(GPU0, GPU1), r"devices\.1\.uuid .* is repeated", id="uuid-repeated"
        ),
        pytest.param(
            YAML.replace("numa: 1", "numa: 1\n    colour: red"),
            r"devices\.0\.colour.*'red'",
            id="unknown-field",
        ),
        pytest.param(
            YAML.replace(GPU0, "GPU:0"), r"devices\.1.*contains , : or ;", id="uuid-with-separator"
        ),
        pytest.param(
            YAML.replace("numa: 1", "mode: turbo"),
            r"mode must be one of .*'turbo'",
            id="unknown-mode",
        ),
        pytest.param(
            YAML.replace(GPU0, "GPU-" + "a" * 60), r"longer than 59 characters", id="uuid-too-long"
        ),
        pytest.param("devices: [", r"not valid YAML or JSON", id="broken-yaml"),
        pytest.param("42", r"devices.*", id="not-a-mapping"),
    ],
)
def test_bad_files_name_the_field_and_value(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(text)
    with pytest.raises(DiscoveryError, match=message) as caught:
        StaticBackend(path).discover()
    assert str(path) in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="cannot read the static device file"):
        StaticBackend(tmp_path / "nope.yaml").discover()


def test_fake_backend_emits_queued_events_and_can_fail() -> None:
    backend = FakeBackend(EXPECTED, poll_s=0.01)
    stop = threading.Event()
    seen: list[HealthEvent] = []
    got = threading.Event()

    def emit(event: HealthEvent) -> None:
        seen.append(event)
        got.set()

    thread = threading.Thread(target=backend.watch_health, args=(stop, emit))
    thread.start()
    backend.emit(HealthEvent(GPU0, False, "Xid 79"))
    assert got.wait(5)
    stop.set()
    thread.join(5)
    assert seen == [HealthEvent(GPU0, False, "Xid 79")]
    backend.fail_with(DiscoveryError("driver gone"))
    with pytest.raises(DiscoveryError, match="driver gone"):
        backend.discover()
