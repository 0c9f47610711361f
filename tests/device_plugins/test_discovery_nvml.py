"""The NVML backend against a pynvml-shaped fake: discovery, errors and Xid health."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from device_plugins.discovery.base import DiscoveryError, HealthEvent
from device_plugins.discovery.nvml import NvmlBackend, load_pynvml, sysfs_numa_node
from tests.device_plugins.fake_nvml import FakeGpu, FakePynvml, NVMLError, NVMLError_GpuIsLost

GPU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"


def write_numa(root: Path, device: str, value: str) -> None:
    folder = root / "bus" / "pci" / "devices" / device
    folder.mkdir(parents=True)
    (folder / "numa_node").write_text(value + "\n")


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    write_numa(tmp_path, "0000:3b:00.0", "0")
    write_numa(tmp_path, "0000:af:00.0", "1")
    write_numa(tmp_path, "0000:d8:00.0", "-1")
    return tmp_path


def two_gpus() -> FakePynvml:
    return FakePynvml(
        [
            FakeGpu(
                GPU1, 1, name="NVIDIA A100-SXM4-40GB", memory_mib=40960, bus_id="00000000:AF:00.0"
            ),
            FakeGpu(GPU0, 0, bus_id="00000000:3B:00.0"),
        ]
    )


def test_discover_reads_identity_memory_numa_and_sorts_by_index(sysfs: Path) -> None:
    backend = NvmlBackend(nvml=two_gpus(), sysfs_root=sysfs)
    devices = backend.discover()
    assert [
        (d.uuid, d.index, d.model, d.memory_mib, d.numa, d.bus_id, d.mode) for d in devices
    ] == [
        (GPU0, 0, "Tesla V100-PCIE-32GB", 32768, 0, "00000000:3B:00.0", "hami-core"),
        (GPU1, 1, "NVIDIA A100-SXM4-40GB", 40960, 1, "00000000:AF:00.0", "hami-core"),
    ]
    assert all(d.healthy for d in devices)


@pytest.mark.parametrize(
    ("bus_id", "expected"),
    [
        pytest.param("00000000:3B:00.0", 0, id="domain-shortened-and-lowercased"),
        pytest.param("0000:af:00.0", 1, id="already-short"),
        pytest.param("00000000:D8:00.0", None, id="negative-means-none"),
        pytest.param("00000000:01:00.0", None, id="missing-file"),
    ],
)
def test_sysfs_numa_node(sysfs: Path, bus_id: str, expected: int | None) -> None:
    assert sysfs_numa_node(sysfs, bus_id) == expected


@pytest.mark.parametrize(
    ("mig", "mode"),
    [
        pytest.param(None, "hami-core", id="mig-not-supported"),
        pytest.param(False, "hami-core", id="mig-disabled"),
        pytest.param(True, "mig", id="mig-enabled"),
    ],
)
def test_mig_mode(tmp_path: Path, mig: bool | None, mode: str) -> None:
    nvml = FakePynvml([FakeGpu(GPU0, 0, mig=mig)])
    assert NvmlBackend(nvml=nvml, sysfs_root=tmp_path).discover()[0].mode == mode


@pytest.mark.parametrize(
    ("preconfigured", "expected"),
    [
        pytest.param(0, [], id="skipped-without-preconfigured-memory"),
        pytest.param(24576, [24576], id="preconfigured-memory-used"),
    ],
)
def test_memory_not_supported(tmp_path: Path, preconfigured: int, expected: list[int]) -> None:
    nvml = FakePynvml([FakeGpu(GPU0, 0, memory_mib=None)])
    backend = NvmlBackend(nvml=nvml, sysfs_root=tmp_path, preconfigured_memory_mib=preconfigured)
    assert [d.memory_mib for d in backend.discover()] == expected


def test_init_failure_says_what_to_check(tmp_path: Path) -> None:
    nvml = FakePynvml([], init_error=NVMLError(12))
    with pytest.raises(DiscoveryError, match=r"NVML could not start.*libnvidia-ml\.so\.1"):
        NvmlBackend(nvml=nvml, sysfs_root=tmp_path).discover()


def test_missing_package_gives_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(DiscoveryError, match="nvidia-ml-py"):
        load_pynvml()
    with pytest.raises(DiscoveryError, match="nvidia-ml-py"):
        NvmlBackend().discover()


def test_init_once_and_shutdown_on_close(tmp_path: Path) -> None:
    nvml = two_gpus()
    backend = NvmlBackend(nvml=nvml, sysfs_root=tmp_path)
    backend.discover()
    backend.discover()
    assert nvml.init_count == 1
    backend.close()
    assert nvml.init_count == 0


class HealthRun:
    """Runs ``watch_health`` in a thread, collecting events."""

    def __init__(self, backend: NvmlBackend) -> None:
        self.events: list[HealthEvent] = []
        self.stop = threading.Event()
        self.seen = threading.Condition()
        self.thread = threading.Thread(target=backend.watch_health, args=(self.stop, self.emit))

    def emit(self, event: HealthEvent) -> None:
        with self.seen:
            self.events.append(event)
            self.seen.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[HealthEvent]:
        with self.seen:
            self.seen.wait_for(lambda: len(self.events) >= count, timeout=timeout)
            return list(self.events)

    def __enter__(self) -> HealthRun:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.mark.parametrize(
    ("xid", "event_type", "marks"),
    [
        pytest.param(79, 0x8, GPU1, id="xid79-fallen-off-the-bus"),
        pytest.param(48, 0x8, GPU1, id="xid48-double-bit-ecc"),
        pytest.param(13, 0x8, None, id="xid13-ignored"),
        pytest.param(31, 0x8, None, id="xid31-ignored"),
        pytest.param(43, 0x8, None, id="xid43-ignored"),
        pytest.param(45, 0x8, None, id="xid45-ignored"),
        pytest.param(68, 0x8, None, id="xid68-ignored"),
        pytest.param(109, 0x8, None, id="xid109-ignored"),
        pytest.param(79, 0x1, None, id="single-bit-ecc-event-not-counted"),
    ],
)
def test_xid_events(tmp_path: Path, xid: int, event_type: int, marks: str | None) -> None:
    nvml = two_gpus()
    with HealthRun(NvmlBackend(nvml=nvml, sysfs_root=tmp_path, event_wait_ms=20)) as run:
        nvml.xid(nvml.gpus[0], xid, event_type)
        nvml.xid(nvml.gpus[1], 79)  # a marker: every earlier event has been handled by now
        events = run.wait_for(2 if marks else 1)
    expected = [HealthEvent(GPU1, False, f"Xid {xid}")] if marks else []
    assert events == [*expected, HealthEvent(GPU0, False, "Xid 79")]
    assert nvml.registered == {GPU0: 0xB, GPU1: 0xB}
    assert nvml.freed


def test_event_for_unknown_device_marks_all(tmp_path: Path) -> None:
    nvml = two_gpus()
    with HealthRun(NvmlBackend(nvml=nvml, sysfs_root=tmp_path, event_wait_ms=20)) as run:
        nvml.xid("not-a-handle", 79)
        events = run.wait_for(1)
    assert events[0] == HealthEvent(None, False, "Xid 79")


def test_wait_error_marks_all_devices(tmp_path: Path) -> None:
    nvml = two_gpus()
    with HealthRun(NvmlBackend(nvml=nvml, sysfs_root=tmp_path, event_wait_ms=20)) as run:
        nvml.events.put(NVMLError_GpuIsLost())
        events = run.wait_for(1)
    assert events[0].uuid is None and not events[0].healthy
    assert "event wait failed" in events[0].reason


def test_registration_failures(tmp_path: Path) -> None:
    from tests.device_plugins.fake_nvml import NVMLError_NotSupported

    nvml = FakePynvml(
        [
            FakeGpu(GPU0, 0, register_error=NVMLError_NotSupported()),
            FakeGpu(GPU1, 1, register_error=NVMLError(999)),
        ]
    )
    with HealthRun(NvmlBackend(nvml=nvml, sysfs_root=tmp_path, event_wait_ms=20)) as run:
        events = run.wait_for(1)
    # Too old to report events: not watched, but not failed either. Any other error: failed.
    assert [(e.uuid, e.healthy) for e in events] == [(GPU1, False)]


def test_health_checks_disabled_reports_nothing(tmp_path: Path) -> None:
    nvml = two_gpus()
    backend = NvmlBackend(nvml=nvml, sysfs_root=tmp_path, health_checks=False)
    with HealthRun(backend) as run:
        nvml.xid(nvml.gpus[0], 79)
    assert run.events == []
    assert "init" not in nvml.calls
