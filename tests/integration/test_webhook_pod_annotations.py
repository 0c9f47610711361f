"""The pod annotations HAMi's webhook adds, over HTTP (AdmissionReview v1), with NVIDIA,
MetaX and Moore Threads served at once: MetaX sGPU's default QoS policy
(``metax-tech.com/sgpu-qos-policy: best-effort``) and Moore Threads'
``mthreads.com/request-gpu-num`` with its whole-GPU limits. An annotation the pod
already has is never replaced.

Each answer's JSON Patch is applied to the pod, as the API server would.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.json_patch import json_patch
from tests.support.server import RunningExtender, standalone_settings, start_extender

SCHEDULER = "vgpu-scheduler"
UID = "0c6f9d52-3f1e-4a8e-9a57-5e3c1a0b2d11"
QOS = "metax-tech.com/sgpu-qos-policy"
APP_CLASS = "metax-tech.com/sgpu-app-class"
GPU_NUM = "mthreads.com/request-gpu-num"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    settings = standalone_settings(
        tmp_path_factory.mktemp("webhook-annotations"),
        scheduler_name=SCHEDULER,
        vendor="nvidia,metax,mthreads",
    )
    server = start_extender(settings)
    yield server
    server.stop()


def _pod(*limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    containers = [
        {"name": f"c{i}", "image": "app", "resources": {"limits": dict(given)}}
        for i, given in enumerate(limits)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": containers},
    }


def _answer(running: RunningExtender, pod: dict[str, Any]) -> dict[str, Any]:
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
    response = running.client.post("/webhook", json=review)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()["response"]
    assert answer["uid"] == UID
    assert answer["allowed"] is True, answer
    return answer


def _ops(answer: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in answer:
        return []
    assert answer["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(answer["patch"]))
    return ops


def _apply(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` with RFC 6901 pointers, the only operation the webhook emits."""
    assert all(op["op"] == "add" for op in ops), ops
    return json_patch(pod, ops)


def _annotations(running: RunningExtender, pod: dict[str, Any]) -> dict[str, str]:
    mutated = _apply(pod, _ops(_answer(running, pod)))
    found: dict[str, str] = mutated["metadata"].get("annotations", {})
    return found


SGPU = {"metax-tech.com/sgpu": "1", "metax-tech.com/vcore": "60", "metax-tech.com/vmemory": "4"}


def test_an_sgpu_pod_without_a_qos_policy_gets_best_effort(running: RunningExtender) -> None:
    pod = _pod(SGPU)
    ops = _ops(_answer(running, pod))
    assert {"op": "add", "path": "/metadata/annotations", "value": {QOS: "best-effort"}} in ops
    assert _apply(pod, ops)["spec"]["schedulerName"] == SCHEDULER


def test_the_key_is_escaped_beside_the_pods_other_annotations(running: RunningExtender) -> None:
    pod = _pod(SGPU, annotations={"team": "ml"})
    ops = _ops(_answer(running, pod))
    added = [op for op in ops if op["path"].startswith("/metadata")]
    assert added == [
        {
            "op": "add",
            "path": "/metadata/annotations/metax-tech.com~1sgpu-qos-policy",
            "value": "best-effort",
        }
    ]
    assert _apply(pod, ops)["metadata"]["annotations"] == {"team": "ml", QOS: "best-effort"}


@pytest.mark.parametrize(
    "given",
    [{QOS: "fixed-share"}, {APP_CLASS: "online"}],
    ids=["qos-given", "online-pod"],
)
def test_a_given_policy_or_an_online_pod_gets_none(
    running: RunningExtender, given: dict[str, str]
) -> None:
    assert _annotations(running, _pod(SGPU, annotations=given)) == given


def test_a_pod_asking_for_no_sgpu_gets_no_qos(running: RunningExtender) -> None:
    assert QOS not in _annotations(running, _pod({"nvidia.com/gpu": "1"}))
    assert QOS not in _annotations(running, _pod({"metax-tech.com/gpu": "1"}))


def test_several_moore_threads_gpus_are_whole_and_counted_on_the_pod(
    running: RunningExtender,
) -> None:
    pod = _pod({"mthreads.com/vgpu": "3"})
    mutated = _apply(pod, _ops(_answer(running, pod)))
    assert mutated["metadata"]["annotations"] == {GPU_NUM: "3"}
    limits = mutated["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {
        "mthreads.com/vgpu": "3",
        "mthreads.com/sgpu-core": "48",
        "mthreads.com/sgpu-memory": "288",
    }


def test_the_last_container_asking_several_gpus_gives_the_count(running: RunningExtender) -> None:
    pod = _pod({"mthreads.com/vgpu": "2"}, {"mthreads.com/vgpu": "1"}, {"mthreads.com/vgpu": "4"})
    assert _annotations(running, pod) == {GPU_NUM: "4"}


def test_one_moore_threads_gpu_gets_no_count(running: RunningExtender) -> None:
    pod = _pod({"mthreads.com/vgpu": "1", "mthreads.com/sgpu-memory": "8"})
    assert GPU_NUM not in _annotations(running, pod)


def test_a_stale_count_is_written_over(running: RunningExtender) -> None:
    # HAMi's webhook sets it whatever the pod says (its test starts from "test123"):
    # Moore Threads' device plugin reads it for the GPUs to give.
    pod = _pod({"mthreads.com/vgpu": "2"}, annotations={GPU_NUM: "7"})
    assert _annotations(running, pod) == {GPU_NUM: "2"}


def test_a_right_count_is_left_alone(running: RunningExtender) -> None:
    pod = _pod({"mthreads.com/vgpu": "2"}, annotations={GPU_NUM: "2"})
    assert not [op for op in _ops(_answer(running, pod)) if op["path"].startswith("/metadata")]
