"""Splitting and the HAMi registration annotation, replica IDs and the device state."""

from __future__ import annotations

import threading

import pytest

from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import HealthEvent, PhysicalDevice
from device_plugins.inventory import Splitting, hami_type, register_annotation, to_device
from device_plugins.replicas import (
    ReplicaIdError,
    physical_uuid,
    preferred_replicas,
    replica_ids,
)
from vgpu_extender.vendors.nvidia.inventory_codec import decode_inventory

GPU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
V100 = "Tesla V100-PCIE-32GB"


def test_annotation_is_hami_json_byte_for_byte() -> None:
    devices = [
        PhysicalDevice(GPU0, 0, V100, 32768, numa=0),
        PhysicalDevice(GPU1, 1, V100, 32768, numa=1),
    ]
    # The literal HAMi's plugin writes for two V100s, split 10 (spec: device-plugin.md §2).
    assert register_annotation(devices, Splitting(split_count=10)) == (
        '[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,'
        '"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
        '{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,'
        '"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core",'
        '"health":true}]'
    )


@pytest.mark.parametrize(
    ("device", "splitting", "expected"),
    [
        pytest.param(
            PhysicalDevice(GPU0, 0, V100, 32768),
            Splitting(4, 1.5, 2.0),
            (4, 49152, 200, "NVIDIA-Tesla V100-PCIE-32GB", True),
            id="scaled-memory-and-cores",
        ),
        pytest.param(
            PhysicalDevice(GPU0, 0, "NVIDIA A100-SXM4-40GB", 40960, mode="mig"),
            Splitting(7, 2.0, 2.0),
            (7, 40960, 100, "NVIDIA A100-SXM4-40GB", True),
            id="mig-not-scaled-name-kept",
        ),
        pytest.param(
            PhysicalDevice(GPU0, 0, V100, 16160, healthy=False),
            Splitting(10, 0.5, 0.5),
            (10, 8080, 50, "NVIDIA-Tesla V100-PCIE-32GB", False),
            id="under-scaled-unhealthy",
        ),
    ],
)
def test_to_device(
    device: PhysicalDevice, splitting: Splitting, expected: tuple[object, ...]
) -> None:
    d = to_device(device, splitting)
    assert (d.count, d.memory_mib, d.cores, d.type, d.healthy) == expected


def test_unhealthy_device_round_trips_without_health_key() -> None:
    value = register_annotation([PhysicalDevice(GPU0, 0, V100, 1024, healthy=False)], Splitting())
    assert '"health"' not in value
    assert decode_inventory(value)[0].healthy is False


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"split_count": 0}, "split_count", id="split"),
        pytest.param({"memory_scaling": 0}, "memory_scaling", id="memory"),
        pytest.param({"core_scaling": -1}, "core_scaling", id="cores"),
    ],
)
def test_splitting_rejects_bad_values(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Splitting(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        pytest.param("Tesla T4", "NVIDIA-Tesla T4", id="prefixed"),
        pytest.param("NVIDIA A10", "NVIDIA A10", id="already-nvidia"),
    ],
)
def test_hami_type(model: str, expected: str) -> None:
    assert hami_type(model) == expected


def test_replica_ids_and_back() -> None:
    ids = replica_ids(GPU0, 3)
    assert ids == [f"{GPU0}-0", f"{GPU0}-1", f"{GPU0}-2"]
    assert {physical_uuid(i) for i in ids} == {GPU0}


@pytest.mark.parametrize(
    "bad",
    [pytest.param("GPU0", id="no-suffix"), pytest.param("GPU-a-b", id="suffix-not-number")],
)
def test_physical_uuid_rejects_foreign_ids(bad: str) -> None:
    with pytest.raises(ReplicaIdError, match=repr(bad)):
        physical_uuid(bad)


def test_replica_ids_respect_kubelets_length_limit() -> None:
    with pytest.raises(ReplicaIdError, match="63"):
        replica_ids("GPU-" + "x" * 60, 2)


A = [f"{GPU0}-{i}" for i in range(3)] + [f"{GPU1}-{i}" for i in range(3)]


@pytest.mark.parametrize(
    ("must", "size", "wanted", "expected"),
    [
        pytest.param([], 1, [GPU1], [f"{GPU1}-0"], id="annotated-gpu-first"),
        pytest.param([], 2, [], [f"{GPU0}-0", f"{GPU1}-0"], id="distinct-gpus"),
        pytest.param([f"{GPU0}-2"], 2, [GPU0, GPU1], [f"{GPU0}-2", f"{GPU1}-0"], id="must-include"),
        pytest.param([], 3, [], [f"{GPU0}-0", f"{GPU1}-0", f"{GPU0}-1"], id="more-than-gpus"),
    ],
)
def test_preferred_replicas(
    must: list[str], size: int, wanted: list[str], expected: list[str]
) -> None:
    assert preferred_replicas(A, must, size, wanted_uuids=wanted) == expected


def dev(uuid: str, healthy: bool = True) -> PhysicalDevice:
    return PhysicalDevice(uuid, 0 if uuid == GPU0 else 1, V100, 1024, healthy=healthy)


@pytest.mark.parametrize(
    ("events", "health", "changes"),
    [
        pytest.param([HealthEvent(GPU0, False, "Xid 79")], [False, True], 1, id="one-gpu"),
        pytest.param([HealthEvent(None, False, "lost")], [False, False], 1, id="all-gpus"),
        pytest.param(
            [HealthEvent(GPU0, False, "Xid 79"), HealthEvent(GPU0, False, "Xid 79")],
            [False, True],
            1,
            id="repeat-is-no-change",
        ),
        pytest.param(
            [HealthEvent("GPU-unknown", False, "x")], [True, True], 0, id="unknown-ignored"
        ),
        pytest.param(
            [HealthEvent(GPU1, False, "x"), HealthEvent(GPU1, True, "back")],
            [True, True],
            2,
            id="recovery-when-told",
        ),
    ],
)
def test_device_state_health(events: list[HealthEvent], health: list[bool], changes: int) -> None:
    state = DeviceState([dev(GPU0), dev(GPU1)])
    start = state.snapshot().version
    assert sum(state.apply(e) for e in events) == changes
    snapshot = state.snapshot()
    assert [d.healthy for d in snapshot.devices] == health
    assert snapshot.version == start + changes


def test_xid_failure_survives_rescan_but_not_removal() -> None:
    state = DeviceState([dev(GPU0), dev(GPU1)])
    state.apply(HealthEvent(GPU0, False, "Xid 79"))
    assert not state.replace([dev(GPU0), dev(GPU1)])  # same discovery: nothing changes
    assert state.failure_reason(GPU0) == "Xid 79"
    assert state.replace([dev(GPU1)])
    assert state.failure_reason(GPU0) is None


def test_wait_for_change_wakes_on_change_and_on_stop() -> None:
    state = DeviceState([dev(GPU0)])
    version = state.snapshot().version
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(state.wait_for_change(version, 10).version)
    )
    thread.start()
    state.apply(HealthEvent(GPU0, False, "Xid 79"))
    thread.join(5)
    assert result == [version + 1]
    stop = threading.Event()
    thread = threading.Thread(
        target=lambda: result.append(
            state.wait_for_change(version + 1, 10, stop=stop.is_set).version
        )
    )
    thread.start()
    stop.set()
    state.wake()
    thread.join(5)
    assert not thread.is_alive()
    assert result[-1] == version + 1
