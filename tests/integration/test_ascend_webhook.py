"""The admission webhook for Ascend pods over HTTP (AdmissionReview v1), with NVIDIA and
every chip of HAMi v2.10's chart served at once: HAMi's rounding of NPU memory to a
template in limits and requests, 910C's pairs, HAMi's refusals in HAMi's words, the
runtime class and ``ASCEND_VISIBLE_DEVICES`` of a configured chip, and the patch of a
container that asks for GPUs and NPUs at once.

Each mutation is checked by applying the returned JSON Patch to the pod, as the API
server would.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.json_patch import json_patch
from tests.support.server import RunningExtender, standalone_settings, start_extender
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, ChipConfig

SCHEDULER = "vgpu-scheduler"
UID = "1f6e3c1a-0000-4000-8000-00000000a5ce"
CHIPS = {chip.common_word: chip for chip in DEFAULT_CHIPS}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    settings = standalone_settings(
        tmp_path_factory.mktemp("ascend-webhook"),
        scheduler_name=SCHEDULER,
        vendor="nvidia,ascend",
    )
    server = start_extender(settings)
    yield server
    server.stop()


def _entry(chip: ChipConfig) -> dict[str, Any]:
    """A chip as HAMi's ``vnpus.configs`` entry."""
    return {
        "commonWord": chip.common_word,
        "chipName": chip.chip_name,
        "resourceName": chip.resource_name,
        "resourceMemoryName": chip.resource_memory_name,
        "resourceCoreName": chip.resource_core_name,
        "memoryAllocatable": chip.memory_allocatable,
        "memoryCapacity": chip.memory_capacity,
        "aiCore": chip.ai_core,
        "aiCPU": chip.ai_cpu,
        "superPod": chip.super_pod,
        "runtimeClassName": chip.runtime_class_name,
        "overwriteEnv": chip.overwrite_env,
        "templates": [
            {"name": t.name, "memory": t.memory, "aiCore": t.ai_core, "aiCPU": t.ai_cpu}
            for t in chip.templates
        ],
    }


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """910B3 with a runtime class and ``overwriteEnv``; 310P as the chart has it."""
    b3 = dataclasses.replace(CHIPS["Ascend910B3"], runtime_class_name="ascend", overwrite_env=True)
    vnpus = {"configs": [_entry(b3), _entry(CHIPS["Ascend310P"])]}
    settings = standalone_settings(
        tmp_path_factory.mktemp("ascend-webhook-configured"),
        scheduler_name=SCHEDULER,
        vendor="nvidia,ascend",
        vendor_options={"ascend": {"vnpus": vnpus}},
    )
    server = start_extender(settings)
    yield server
    server.stop()


def _container(
    name: str,
    limits: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "image": "ascend", "resources": resources}


def _pod(
    *containers: dict[str, Any],
    init: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = init
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    metadata: dict[str, Any] = {"name": "npu", "namespace": "default"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _npu(cw: str, count: str | None = "1", memory: str | None = None) -> dict[str, Any]:
    limits: dict[str, str] = {}
    if count is not None:
        limits[f"huawei.com/{cw}"] = count
    if memory is not None:
        limits[f"huawei.com/{cw}-memory"] = memory
    return _pod(_container("main", limits))


def _admit(running: RunningExtender, pod: dict[str, Any]) -> dict[str, Any]:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }
    answer = running.client.post("/webhook", json=review)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()["response"]
    assert response["uid"] == UID
    return response


def _patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def _apply(document: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` (the only operation the webhook emits); a path whose parent is
    missing fails, as on the API server."""
    assert all(op["op"] == "add" for op in patch), patch
    return json_patch(document, patch)


def _mutated(running: RunningExtender, pod: dict[str, Any]) -> dict[str, Any]:
    response = _admit(running, pod)
    assert response["allowed"] is True, response
    patch = _patch(response)
    paths = [op["path"] for op in patch]
    assert len(paths) == len(set(paths)), paths  # one operation per key
    return _apply(pod, patch)


def _refusal(running: RunningExtender, pod: dict[str, Any]) -> str:
    response = _admit(running, pod)
    assert response["allowed"] is False
    assert "patch" not in response
    message: str = response["status"]["message"]
    return message


def _resources(pod: dict[str, Any], position: int = 0, kind: str = "containers") -> Any:
    return pod["spec"][kind][position]["resources"]


@pytest.mark.parametrize(
    ("cw", "asked", "written"),
    [
        ("Ascend910A", "2000", "2184"),  # vir02
        ("Ascend910A", "20000", "32768"),  # between the largest template and capacity
        ("Ascend310P", "3500", "6144"),  # vir02 (HAMi issue #748)
        ("Ascend310P", "20000", "21527"),  # 310P allocates less than its capacity
        ("Ascend910B3", "16384", "16384"),  # a template exactly
    ],
)
def test_hard_split_memory_is_rounded_in_limits_and_requests(
    running: RunningExtender, cw: str, asked: str, written: str
) -> None:
    mutated = _mutated(running, _npu(cw, "1", asked))
    assert mutated["spec"]["schedulerName"] == SCHEDULER
    resources = _resources(mutated)
    assert resources["limits"] == {f"huawei.com/{cw}": "1", f"huawei.com/{cw}-memory": written}
    assert resources["requests"] == {f"huawei.com/{cw}-memory": written}
    assert "runtimeClassName" not in mutated["spec"]  # the chart configures none


def test_no_memory_is_the_whole_card(running: RunningExtender) -> None:
    mutated = _mutated(running, _npu("Ascend910B3", "2"))
    assert _resources(mutated)["limits"]["huawei.com/Ascend910B3-memory"] == "65536"
    assert _resources(mutated)["requests"]["huawei.com/Ascend910B3-memory"] == "65536"


def test_existing_requests_keep_their_other_keys(running: RunningExtender) -> None:
    pod = _pod(
        _container(
            "main",
            {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "2000"},
            {"cpu": "1", "huawei.com/Ascend910A-memory": "2000"},
        )
    )
    resources = _resources(_mutated(running, pod))
    assert resources["requests"] == {"cpu": "1", "huawei.com/Ascend910A-memory": "2184"}
    assert resources["limits"]["huawei.com/Ascend910A-memory"] == "2184"


def test_910a_memory_beyond_the_card_is_refused_in_hamis_words(
    running: RunningExtender,
) -> None:
    assert (
        _refusal(running, _npu("Ascend910A", "1", "40000"))
        == "huawei.com/Ascend910A-memory 40000 is invalid"
    )


def test_910c_one_npu_becomes_a_pair(running: RunningExtender) -> None:
    pod = _pod(_container("main", {"huawei.com/Ascend910C": "1"}, {"huawei.com/Ascend910C": "1"}))
    resources = _resources(_mutated(running, pod))
    assert resources["limits"] == {
        "huawei.com/Ascend910C": "2",
        "huawei.com/Ascend910C-memory": "65536",
    }
    assert resources["requests"] == {
        "huawei.com/Ascend910C": "2",
        "huawei.com/Ascend910C-memory": "65536",
    }


def test_910c_odd_counts_are_refused(running: RunningExtender) -> None:
    assert (
        _refusal(running, _npu("Ascend910C", "3"))
        == "Ascend910C device request must be 1 or 2*n, got 3"
    )
    assert (
        _resources(_mutated(running, _npu("Ascend910C", "4")))["limits"]["huawei.com/Ascend910C"]
        == "4"
    )


def test_cores_are_refused_in_hard_split_and_kept_in_hami_core(
    running: RunningExtender,
) -> None:
    limits = {
        "huawei.com/Ascend910B3": "1",
        "huawei.com/Ascend910B3-memory": "10000",
        "huawei.com/Ascend910B3-core": "5",
    }
    assert (
        _refusal(running, _pod(_container("main", limits)))
        == "huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode"
    )
    soft = _pod(_container("main", limits), annotations={"huawei.com/vnpu-mode": "hami-core"})
    resources = _resources(_mutated(running, soft))
    # hami-core keeps memory as asked (no template), cores as given.
    assert resources["limits"] == limits
    assert resources["requests"] == {"huawei.com/Ascend910B3-memory": "10000"}
    zero = {**limits, "huawei.com/Ascend910B3-core": "0"}
    assert (
        _resources(_mutated(running, _pod(_container("main", zero))))["limits"][
            "huawei.com/Ascend910B3-memory"
        ]
        == "16384"
    )


def test_several_npus_in_hard_split_must_be_whole(running: RunningExtender) -> None:
    assert (
        _refusal(running, _npu("Ascend910B3", "2", "16384"))
        == "vNPU not supported for multiple devices"
    )
    # A memory that rounds to the whole card is whole.
    whole = _mutated(running, _npu("Ascend910B3", "2", "40000"))
    assert _resources(whole)["limits"]["huawei.com/Ascend910B3-memory"] == "65536"
    soft = _npu("Ascend910B3", "2", "16384")
    soft["metadata"]["annotations"] = {"huawei.com/vnpu-mode": "hami-core"}
    assert _resources(_mutated(running, soft))["limits"]["huawei.com/Ascend910B3-memory"] == (
        "16384"
    )


def test_init_containers_are_admitted_too(running: RunningExtender) -> None:
    pod = _pod(
        _container("main", {"cpu": "1"}),
        init=[
            _container(
                "warmup", {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "3000"}
            )
        ],
    )
    mutated = _mutated(running, pod)
    assert mutated["spec"]["schedulerName"] == SCHEDULER
    assert (
        _resources(mutated, kind="initContainers")["limits"]["huawei.com/Ascend310P-memory"]
        == "3072"
    )
    assert _resources(mutated) == {"limits": {"cpu": "1"}}


def test_gpus_and_npus_in_one_container_patch_each_key_once(running: RunningExtender) -> None:
    limits = {"nvidia.com/gpu": "1", "huawei.com/Ascend910B3": "1"}
    mutated = _mutated(running, _pod(_container("main", limits)))
    resources = _resources(mutated)
    assert resources["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "100",  # NVIDIA's exclusive default
        "huawei.com/Ascend910B3": "1",
        "huawei.com/Ascend910B3-memory": "65536",
    }
    assert resources["requests"] == {"huawei.com/Ascend910B3-memory": "65536"}


def test_a_container_without_resources_gets_one_resources_object(
    running: RunningExtender,
) -> None:
    pod = _pod(
        {"name": "sidecar", "image": "x"}, _container("main", {"huawei.com/Ascend910A": "1"})
    )
    response = _admit(running, pod)
    patch = _patch(response)
    # Nothing for the sidecar; the NPU container's memory in both maps.
    assert not [op for op in patch if op["path"].startswith("/spec/containers/0")]
    mutated = _apply(pod, patch)
    assert _resources(mutated, 1)["requests"] == {"huawei.com/Ascend910A-memory": "32768"}


def test_a_configured_runtime_class_is_set_unless_the_pod_has_one(
    configured: RunningExtender,
) -> None:
    mutated = _mutated(configured, _npu("Ascend910B3", "1", "16384"))
    assert mutated["spec"]["runtimeClassName"] == "ascend"
    own = _npu("Ascend910B3", "1", "16384")
    own["spec"]["runtimeClassName"] = "mine"
    assert _mutated(configured, own)["spec"]["runtimeClassName"] == "mine"
    # A chip without one sets none.
    assert "runtimeClassName" not in _mutated(configured, _npu("Ascend310P"))["spec"]


def test_overwrite_env_hides_npus_from_containers_that_ask_for_none(
    configured: RunningExtender,
) -> None:
    pod = _pod(
        _container("main", {"huawei.com/Ascend910B3": "1"}),
        {"name": "log", "image": "x", "env": [{"name": "A", "value": "1"}]},
        {"name": "gpu", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
    )
    mutated = _mutated(configured, pod)
    containers = mutated["spec"]["containers"]
    assert "env" not in containers[0]  # it asks for the chip: the plugin sets the env
    assert containers[1]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "ASCEND_VISIBLE_DEVICES", "value": ""},
    ]
    assert containers[2]["env"] == [{"name": "ASCEND_VISIBLE_DEVICES", "value": ""}]


def test_overwrite_env_reaches_pods_that_ask_for_no_device(configured: RunningExtender) -> None:
    pod = _pod(_container("web", {"cpu": "1"}))
    mutated = _mutated(configured, pod)
    assert mutated["spec"]["containers"][0]["env"] == [
        {"name": "ASCEND_VISIBLE_DEVICES", "value": ""}
    ]
    assert "schedulerName" not in mutated["spec"]  # not ours: no NPU asked for
    ignored = _pod(_container("web", {"cpu": "1"}), annotations={"hami.io/webhook": "ignore"})
    assert _patch(_admit(configured, ignored)) == []


def test_another_ascend_chips_env_does_not_hide_the_npus_a_container_uses(
    configured: RunningExtender,
) -> None:
    # 910B3 has overwriteEnv; a container of 310P NPUs must still see its NPUs.
    mutated = _mutated(configured, _npu("Ascend310P"))
    assert "env" not in mutated["spec"]["containers"][0]


def test_a_pod_with_its_own_env_name_keeps_its_value(configured: RunningExtender) -> None:
    pod = _pod(
        {"name": "log", "image": "x", "env": [{"name": "ASCEND_VISIBLE_DEVICES", "value": "0"}]}
    )
    assert _patch(_admit(configured, pod)) == []
