"""The Cambricon vendor with HAMi's literals (``pkg/device/cambricon``): the config
section, request parsing in 256 MiB units with cores defaulting to 100, the capacity
inventory and its synthetic ids, the pod annotations (DSMLU profile and assigned flag,
the device keys with an empty leading container), admission, the node lock, and
hostile input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vgpu_extender.domain import (
    AnnotationError,
    ContainerRequest,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    PodRequest,
    Reason,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.cambricon import CambriconConfig, CambriconVendor, cambricon_vendors
from vgpu_extender.vendors.cambricon.allocation_codec import device_index
from vgpu_extender.vendors.cambricon.lock import (
    LOCK_ANNOTATION,
    lock_held,
    lock_value,
    needs_lock,
)

VENDOR = CambriconVendor()
#: HAMi's flag default and tests name the count cambricon.com/mlu.
TEST_VENDOR = cambricon_vendors({"resourceCountName": "cambricon.com/mlu"})


def _pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u1", "annotations": annotations or {}},
        "spec": {"initContainers": list(init), "containers": list(containers)},
    }


def _ctr(
    name: str = "c", *, limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": limits or {}, "requests": requests or {}}}


# -- config ---------------------------------------------------------------------


def test_defaults_are_the_charts_names() -> None:
    assert VENDOR.resource_names == {
        "cambricon.com/vmlu",
        "cambricon.com/mlu.smlu.vmemory",
        "cambricon.com/mlu.smlu.vcore",
    }
    assert VENDOR.name == "MLU"


def test_the_section_renames_resources() -> None:
    config = CambriconConfig.from_mapping(
        {
            "resourceCountName": "cambricon.com/mlu",
            "resourceMemoryName": "cambricon.com/mlu370.smlu.vmemory",
            "resourceCoreName": "cambricon.com/mlu370.smlu.vcore",
        }
    )
    assert config.count_resource == "cambricon.com/mlu"
    assert config.memory_resource == "cambricon.com/mlu370.smlu.vmemory"
    assert config.cores_resource == "cambricon.com/mlu370.smlu.vcore"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"resourceCountName": "has space"}, "resourceCountName"),
        ({"resourceMemoryName": 5}, "resourceMemoryName"),
        ({"resourceCoreName": ""}, "resourceCoreName"),
        ({"mluResourceName": "x"}, "mluResourceName"),
    ],
    ids=["space", "not a string", "empty", "unknown key"],
)
def test_bad_settings_name_the_key(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        CambriconConfig.from_mapping(settings)


# -- requests -------------------------------------------------------------------


def test_a_bare_count_asks_for_whole_mlus() -> None:
    request = TEST_VENDOR.parse_pod(_pod(_ctr(limits={"cambricon.com/mlu": "1"})))
    assert request.containers == (
        ContainerRequest("c", count=1, memory_percent=100, cores=100, vendor="MLU"),
    )


def test_memory_is_in_256_mib_units_and_cores_are_percent() -> None:
    limits = {
        "cambricon.com/vmlu": "1",
        "cambricon.com/mlu.smlu.vmemory": "1000",
        "cambricon.com/mlu.smlu.vcore": "1",
    }
    (ask,) = VENDOR.parse_pod(_pod(_ctr(limits=limits))).containers
    assert (ask.memory_mib, ask.memory_percent, ask.cores) == (256000, 0, 1)


def test_requests_are_read_when_limits_have_none() -> None:
    requests = {"cambricon.com/vmlu": "2", "cambricon.com/mlu.smlu.vmemory": "4"}
    (ask,) = VENDOR.parse_pod(_pod(_ctr(requests=requests))).containers
    assert (ask.count, ask.memory_mib, ask.cores) == (2, 1024, 100)


def test_limits_win_over_requests() -> None:
    ctr = _ctr(limits={"cambricon.com/vmlu": "1"}, requests={"cambricon.com/vmlu": "3"})
    assert VENDOR.parse_pod(_pod(ctr)).containers[0].count == 1


def test_every_container_keeps_its_position_init_first() -> None:
    pod = _pod(_ctr("app", limits={"cambricon.com/vmlu": "1"}), _ctr("side"), init=(_ctr("i"),))
    request = VENDOR.parse_pod(pod)
    assert [(c.name, c.init, c.count) for c in request.containers] == [
        ("i", True, 0),
        ("app", False, 1),
        ("side", False, 0),
    ]
    assert all(c.vendor == "MLU" for c in request.containers)


@pytest.mark.parametrize("memory", ["16Gi", "16.0Gi", "1.5", "-1", "8388608"], ids=str)
def test_memory_hami_rejects_is_an_error(memory: str) -> None:
    limits = {"cambricon.com/vmlu": "1", "cambricon.com/mlu.smlu.vmemory": memory}
    with pytest.raises(RequestError, match="vmemory"):
        VENDOR.parse_pod(_pod(_ctr(limits=limits)))


@pytest.mark.parametrize("count", ["x", "0.5", "-2"], ids=str)
def test_a_bad_count_is_an_error(count: str) -> None:
    with pytest.raises(RequestError, match=r"cambricon\.com/vmlu"):
        VENDOR.parse_pod(_pod(_ctr(limits={"cambricon.com/vmlu": count})))


def test_uuid_annotations_select_and_type_annotations_are_ignored() -> None:
    pod = _pod(
        _ctr(limits={"cambricon.com/vmlu": "1"}),
        annotations={
            "cambricon.com/use-gpuuuid": "n-cambricon-mlu-0, n-cambricon-mlu-1",
            "cambricon.com/nouse-gpuuuid": "n-cambricon-mlu-2",
            "cambricon.com/use-mlutype": "MLU370",
        },
    )
    selector = VENDOR.parse_pod(pod).selector
    assert selector.use_uuids == ("n-cambricon-mlu-0", "n-cambricon-mlu-1")
    assert selector.avoid_uuids == ("n-cambricon-mlu-2",)
    assert not selector.constrains_types


def test_a_pod_of_no_mlu_is_not_managed() -> None:
    assert not VENDOR.parse_pod(_pod(_ctr(limits={"nvidia.com/gpu": "1"}))).managed


# -- inventory ------------------------------------------------------------------


def test_the_inventory_comes_from_capacity_100_vcores_per_mlu() -> None:
    capacity = {"cambricon.com/mlu.smlu.vcore": "400", "cambricon.com/mlu.smlu.vmemory": "384"}
    devices = VENDOR.devices_from_capacity("node1", capacity)
    assert [d.uuid for d in devices] == [f"node1-cambricon-mlu-{i}" for i in range(4)]
    first = devices[0]
    # 384 units * 256 MiB * 100 / 400 vcores = 24576 MiB per MLU.
    assert (first.index, first.count, first.memory_mib, first.cores) == (0, 100, 24576, 100)
    assert (first.type, first.vendor, first.healthy) == ("MLU", "MLU", True)
    assert devices[3].index == 3


def test_a_partial_hundred_of_vcores_is_one_more_mlu() -> None:
    capacity = {"cambricon.com/mlu.smlu.vcore": "250", "cambricon.com/mlu.smlu.vmemory": "100"}
    devices = VENDOR.devices_from_capacity("n", capacity)
    assert len(devices) == 3
    assert devices[0].memory_mib == 100 * 256 * 100 // 250


def test_no_vcore_capacity_is_no_mlu() -> None:
    assert VENDOR.devices_from_capacity("n", {}) == ()
    assert VENDOR.devices_from_capacity("n", {"cambricon.com/mlu.smlu.vcore": "0"}) == ()


@pytest.mark.parametrize(
    "capacity",
    [
        {"cambricon.com/mlu.smlu.vcore": "many"},
        {"cambricon.com/mlu.smlu.vcore": "100", "cambricon.com/mlu.smlu.vmemory": "-1"},
        {"cambricon.com/mlu.smlu.vcore": "100", "cambricon.com/mlu.smlu.vmemory": "9999999"},
    ],
    ids=["not a number", "negative", "over int32"],
)
def test_bad_capacity_is_an_inventory_error(capacity: dict[str, str]) -> None:
    with pytest.raises(InventoryError):
        VENDOR.devices_from_capacity("n", capacity)


def test_annotations_carry_no_mlu_inventory() -> None:
    assert (
        VENDOR.decode_node(NodeFacts("node-a", annotations={VENDOR.inventory_annotation: "[]"}))
        is None
    )
    assert VENDOR.node_keys == ()
    assert VENDOR.handshake is None


def test_the_standalone_inventory_round_trips() -> None:
    capacity = {"cambricon.com/mlu.smlu.vcore": "200", "cambricon.com/mlu.smlu.vmemory": "64"}
    devices = VENDOR.devices_from_capacity("n", capacity)
    assert VENDOR.decode_inventory(VENDOR.encode_inventory(devices)) == devices


# -- pod annotations ------------------------------------------------------------


def _assignment(*containers: tuple[DeviceGrant, ...]) -> PodAssignment:
    return PodAssignment("node1", containers, (False,) * len(containers))


def test_patch_annotations_literals() -> None:
    grant = DeviceGrant("device-0", 256000, 1, vendor="MLU")
    annotations = VENDOR.bind_annotations(_assignment((grant,)), bind_time=7)
    assert annotations == {
        "hami.io/vgpu-node": "node1",
        "hami.io/cambricon-mlu-devices-to-allocate": "device-0,MLU,256000,1:;",
        "hami.io/cambricon-mlu-devices-allocated": "device-0,MLU,256000,1:;",
        "CAMBRICON_DSMLU_ASSIGNED": "false",
        "CAMBRICON_DSMLU_PROFILE": "0_1_1000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "7",
    }


def test_a_leading_container_without_mlu_keeps_its_slot() -> None:
    grant = DeviceGrant("device-0", 256000, 1, vendor="MLU")
    annotations = VENDOR.bind_annotations(_assignment((), (grant,)), bind_time=7)
    assert annotations["hami.io/cambricon-mlu-devices-to-allocate"] == ";device-0,MLU,256000,1:;"
    assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_1_1000"


def test_the_profile_is_the_first_container_with_a_device() -> None:
    first = DeviceGrant("n-cambricon-mlu-3", 512, 20, vendor="MLU")
    later = DeviceGrant("n-cambricon-mlu-1", 2560, 50, vendor="MLU")
    annotations = VENDOR.bind_annotations(_assignment((), (first,), (later,)), bind_time=1)
    assert annotations["CAMBRICON_DSMLU_PROFILE"] == "3_20_2"


def test_no_mlu_writes_nothing() -> None:
    gpu = DeviceGrant("GPU-0", 1, 1, vendor="NVIDIA")
    assert VENDOR.bind_annotations(_assignment((gpu,)), bind_time=1) == {}


def test_the_allocated_record_reads_back() -> None:
    assert VENDOR.assignment_annotation == "hami.io/cambricon-mlu-devices-allocated"
    decoded = VENDOR.decode_assignment(";device-0,MLU,256000,1:;", init=(True, False))
    assert decoded == ((), (DeviceGrant("device-0", 256000, 1, vendor="MLU"),))


@pytest.mark.parametrize("uuid", ["mlu", "n-cambricon-mlu-", ""], ids=repr)
def test_an_id_without_an_index_cannot_be_profiled(uuid: str) -> None:
    with pytest.raises(AnnotationError):
        device_index(uuid)


# -- admission and lock ---------------------------------------------------------


def test_admission_marks_a_container_with_the_count_in_limits() -> None:
    uses = VENDOR.admit(_ctr(limits={"cambricon.com/vmlu": "1"}), _pod())
    assert uses is not None and uses.uses and not uses.limits and not uses.requests
    assert VENDOR.admit(_ctr(requests={"cambricon.com/vmlu": "1"}), _pod()) is None


def test_the_node_lock_is_cambricons_own_with_two_minutes() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert LOCK_ANNOTATION == "cambricon.com/dsmlu.lock"
    assert lock_value(now) == "2026-01-02T03:04:05Z"
    assert lock_held(lock_value(now), now + timedelta(minutes=2))
    assert not lock_held(lock_value(now), now + timedelta(minutes=2, seconds=1))
    with pytest.raises(ValueError):
        lock_held("yesterday", now)


def test_only_app_containers_take_the_lock() -> None:
    asks = ContainerRequest("i", count=1, init=True, vendor="MLU")
    assert not needs_lock(PodRequest("u", containers=(asks, ContainerRequest("a"))), "MLU")
    app = ContainerRequest("a", count=1, vendor="MLU")
    assert needs_lock(PodRequest("u", containers=(app,)), "MLU")


def test_reasons_read_as_hamis() -> None:
    assert VENDOR.wording.text(Reason.MEMORY) == "CardInsufficientMemory"
    assert VENDOR.wording.text(Reason.NO_DEVICES) == "no mlus"
    texts = VENDOR.wording.all_texts()
    assert len(set(texts)) == len(texts)
    assert not any(a != b and b.startswith(a) for a in texts for b in texts)
    assert not any("%" in text for text in texts)


def test_the_webhook_writes_no_cores_for_a_bare_count() -> None:
    assert VENDOR.admission.count == "cambricon.com/vmlu"
    assert VENDOR.admission.cores is None


def test_the_capacity_entries_read() -> None:
    assert VENDOR.capacity_keys == (
        "cambricon.com/mlu.smlu.vcore",
        "cambricon.com/mlu.smlu.vmemory",
    )
