"""Reading a pod for one Ascend chip, as HAMi's ``GenerateResourceRequests`` does, with
bad quantities reported by container and resource."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from vgpu_extender.domain import ContainerRequest, DeviceSelector, RequestError
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendConfig, ChipConfig
from vgpu_extender.vendors.ascend.request import parse_pod

CONFIG = AscendConfig()
A910 = next(chip for chip in DEFAULT_CHIPS if chip.common_word == "Ascend910A")
B3 = next(chip for chip in DEFAULT_CHIPS if chip.common_word == "Ascend910B3")


def _pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"uid": "u1", "namespace": "ml", "name": "p"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "metadata": metadata,
        "spec": {"containers": list(containers), "initContainers": list(init), "priority": 7},
    }


def _ctr(
    name: str, limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "resources": resources}


def test_hami_literal_count_and_memory() -> None:
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": 2, "huawei.com/Ascend910A-memory": 8738}))
    (ask,) = parse_pod(pod, A910, CONFIG).containers
    assert ask == ContainerRequest(
        name="c", count=2, memory_mib=8738, memory_percent=0, cores=0, vendor="Ascend910A"
    )


def test_hami_literal_no_memory_is_the_whole_npu() -> None:
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": "2"}))
    (ask,) = parse_pod(pod, A910, CONFIG).containers
    assert (ask.count, ask.memory_mib, ask.memory_percent) == (2, 0, 100)


def test_memory_factor_10_scales_128_to_1280() -> None:
    chip = dataclasses.replace(A910, memory_factor=10)
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 128}))
    (ask,) = parse_pod(pod, chip, CONFIG).containers
    assert ask.memory_mib == 1280


def test_limits_win_over_requests_and_requests_fill_in() -> None:
    limits = {"huawei.com/Ascend910B3-memory": "16384"}
    requests = {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "999"}
    (ask,) = parse_pod(_pod(_ctr("c", limits, requests)), B3, CONFIG).containers
    assert (ask.count, ask.memory_mib) == (1, 16384)


def test_cores_and_the_hami_core_mode() -> None:
    limits = {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-core": "50"}
    pod = _pod(_ctr("c", limits), annotations={"huawei.com/vnpu-mode": "hami-core"})
    (ask,) = parse_pod(pod, B3, CONFIG).containers
    assert (ask.cores, ask.mode) == (50, "hami-core")
    for other in ("Hami-Core", "hami-core ", "vnpu"):
        pod = _pod(_ctr("c", limits), annotations={"huawei.com/vnpu-mode": other})
        assert parse_pod(pod, B3, CONFIG).containers[0].mode == ""


def test_other_chips_resources_and_memory_only_asks_are_no_ask() -> None:
    pod = _pod(
        _ctr("nvidia", {"nvidia.com/gpu": 1}),
        _ctr("b3", {"huawei.com/Ascend910B3": 1}),
        _ctr("memory-only", {"huawei.com/Ascend910A-memory": 4096}),
        _ctr("zero", {"huawei.com/Ascend910A": 0, "huawei.com/Ascend910A-memory": 4096}),
    )
    request = parse_pod(pod, A910, CONFIG)
    assert [c.count for c in request.containers] == [0, 0, 0, 0]
    assert all(c.vendor == "Ascend910A" for c in request.containers)
    assert not request.managed


def test_init_containers_first_and_pod_fields() -> None:
    pod = _pod(
        _ctr("app", {"huawei.com/Ascend910A": 1, "cpu": "2", "memory": "1Gi"}),
        init=(_ctr("setup", {"huawei.com/Ascend910A": 1}),),
    )
    request = parse_pod(pod, A910, CONFIG)
    assert [(c.name, c.init) for c in request.containers] == [("setup", True), ("app", False)]
    assert (request.uid, request.namespace, request.name, request.priority) == (
        "u1",
        "ml",
        "p",
        7,
    )
    assert (request.cpu_milli, request.host_memory_mib) == (2000, 1024)
    assert request.vendors == ("Ascend910A",)


def test_uuid_selectors_are_trimmed_comma_lists() -> None:
    annotations = {
        "hami.io/use-Ascend910A-uuid": " die-1 , die-2,,",
        "hami.io/no-use-Ascend910A-uuid": "die-3",
        "hami.io/use-Ascend910B3-uuid": "other-chip",
    }
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": 1}), annotations=annotations)
    assert parse_pod(pod, A910, CONFIG).selector == DeviceSelector(
        use_uuids=("die-1", "die-2"), avoid_uuids=("die-3",)
    )
    empty = {"hami.io/use-Ascend910A-uuid": "", "hami.io/no-use-Ascend910A-uuid": " , "}
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": 1}), annotations=empty)
    assert parse_pod(pod, A910, CONFIG).selector == DeviceSelector()


def test_a_chip_without_a_core_resource_reads_no_cores() -> None:
    chip = dataclasses.replace(A910, resource_core_name="")
    pod = _pod(_ctr("c", {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": 9}))
    assert parse_pod(pod, chip, CONFIG).containers[0].cores == 0


@pytest.mark.parametrize(
    ("limits", "resource"),
    [
        ({"huawei.com/Ascend910A": "-1"}, "huawei.com/Ascend910A"),
        ({"huawei.com/Ascend910A": "1.5"}, "huawei.com/Ascend910A"),
        ({"huawei.com/Ascend910A": "3Gi"}, "huawei.com/Ascend910A"),
        ({"huawei.com/Ascend910A": True}, "huawei.com/Ascend910A"),
        ({"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": "-5"}, "-memory"),
        ({"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": "16Gi"}, "-memory"),
        ({"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": "lots"}, "-memory"),
        ({"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": "-1"}, "-core"),
        ({"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": 2**31}, "-core"),
    ],
)
def test_bad_quantities_name_the_container_and_resource(
    limits: dict[str, Any], resource: str
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_pod(_pod(_ctr("trainer", limits)), A910, CONFIG)
    assert caught.value.container == "trainer"
    assert caught.value.field.endswith(resource)


def test_memory_overflowing_after_the_factor_is_an_error() -> None:
    chip: ChipConfig = dataclasses.replace(A910, memory_factor=10)
    limits = {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 2**30}
    with pytest.raises(RequestError, match="memory factor") as caught:
        parse_pod(_pod(_ctr("c", limits)), chip, CONFIG)
    assert caught.value.field == "huawei.com/Ascend910A-memory"


@pytest.mark.parametrize(
    "pod",
    [
        [],
        {"metadata": [], "spec": {}},
        {"spec": {"containers": {"name": "c"}}},
        {"spec": {"containers": ["c"]}},
        {"spec": {"containers": [{"name": 5}]}},
        {"spec": {"containers": [{"name": "c", "resources": {"limits": []}}]}},
        {"spec": {"priority": "high"}},
        {"metadata": {"uid": 5}},
        {"metadata": {"annotations": {"hami.io/use-Ascend910A-uuid": 5}}},
    ],
)
def test_hostile_pods_are_request_errors(pod: Any) -> None:
    with pytest.raises(RequestError):
        parse_pod(pod, A910, CONFIG)
