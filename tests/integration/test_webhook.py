"""The mutating admission webhook, as the API server calls it: AdmissionReview v1 over HTTP.

Each mutation is checked by applying the returned JSON Patch to the pod (as the API
server would) and looking at the pod that results.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.json_patch import json_patch
from tests.support.server import RunningExtender, standalone_settings, start_extender

SCHEDULER = "vgpu-scheduler"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    server = start_extender(
        standalone_settings(tmp_path_factory.mktemp("webhook"), scheduler_name=SCHEDULER)
    )
    yield server
    server.stop()


def _pod(
    limits: dict[str, str] | None = None,
    *,
    requests: dict[str, str] | None = None,
    init: dict[str, str] | None = None,
    scheduler: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    privileged: bool = False,
    node: str | None = None,
    env: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    container: dict[str, Any] = {"name": "main", "image": "cuda", "resources": resources}
    if privileged:
        container["securityContext"] = {"privileged": True}
    if env is not None:
        container["env"] = env
    spec: dict[str, Any] = {"containers": [container]}
    if init is not None:
        spec["initContainers"] = [
            {"name": "warmup", "image": "cuda", "resources": {"limits": init}}
        ]
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node is not None:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": "p", "namespace": "default"}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _review(pod: Any, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default",
            "operation": operation,
            "object": pod,
        },
    }


def _apply(document: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add``, the only operation the webhook emits."""
    assert all(op["op"] == "add" for op in patch), patch
    return json_patch(document, patch)


def _admit(running: RunningExtender, pod: Any, operation: str = "CREATE") -> dict[str, Any]:
    answer = running.client.post("/webhook", json=_review(pod, operation))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response: dict[str, Any] = body["response"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    return response


def _mutated(response: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True
    if "patch" not in response:
        return pod
    assert response["patchType"] == "JSONPatch"
    return _apply(pod, json.loads(base64.b64decode(response["patch"])))


def _limits(pod: dict[str, Any], kind: str = "containers") -> dict[str, str]:
    limits: dict[str, str] = pod["spec"][kind][0]["resources"].get("limits", {})
    return limits


@pytest.mark.parametrize(
    ("pod", "limits"),
    [
        (_pod({"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}),
        (_pod({"nvidia.com/gpumem": "4000"}), {"nvidia.com/gpumem": "4000", "nvidia.com/gpu": "1"}),
        (
            _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}),
            {
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem-percentage": "100",
                "nvidia.com/gpucores": "100",
            },
        ),
        (
            _pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50"}),
            {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50"},
        ),
        (
            _pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}),
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"},
        ),
        (
            _pod(requests={"nvidia.com/gpumem": "2000"}),
            {"nvidia.com/gpu": "1"},
        ),
    ],
    ids=[
        "bare-count-is-exclusive",
        "memory-only-gets-one-gpu",
        "full-percentage-is-exclusive",
        "half-percentage-shares",
        "cores-given",
        "requests-only",
    ],
)
def test_gpu_pods_get_our_scheduler_and_hamis_defaults(
    running: RunningExtender, pod: dict[str, Any], limits: dict[str, str]
) -> None:
    mutated = _mutated(_admit(running, pod), pod)
    assert mutated["spec"]["schedulerName"] == SCHEDULER
    assert _limits(mutated) == limits


def test_init_containers_get_the_defaults_too(running: RunningExtender) -> None:
    pod = _pod({"cpu": "1"}, init={"nvidia.com/gpu": "1"})
    mutated = _mutated(_admit(running, pod), pod)
    assert _limits(mutated, "initContainers") == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "100",
    }
    assert _limits(mutated) == {"cpu": "1"}


@pytest.mark.parametrize(
    "env",
    [None, [{"name": "A", "value": "1"}]],
    ids=["no-env", "other-env"],
)
def test_priority_becomes_hami_cores_environment(
    running: RunningExtender, env: list[dict[str, str]] | None
) -> None:
    pod = _pod(
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/priority": "0"}, env=env
    )
    mutated = _mutated(_admit(running, pod), pod)
    assert mutated["spec"]["containers"][0]["env"] == [
        *(env or []),
        {"name": "CUDA_TASK_PRIORITY", "value": "0"},
    ]


@pytest.mark.parametrize(
    "pod",
    [
        _pod({"cpu": "1"}),
        _pod({"nvidia.com/gpu": "1"}, scheduler="volcano"),
        _pod({"nvidia.com/gpu": "1"}, labels={"hami.io/webhook": "ignore"}),
        _pod({"nvidia.com/gpu": "1"}, annotations={"hami.io/webhook": "ignore"}),
        _pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"}, scheduler=SCHEDULER),
    ],
    ids=["no-gpu", "other-scheduler", "ignore-label", "ignore-annotation", "nothing-to-add"],
)
def test_other_pods_pass_untouched(running: RunningExtender, pod: dict[str, Any]) -> None:
    response = _admit(running, pod)
    assert response["allowed"] is True
    assert "patch" not in response and "patchType" not in response


def test_default_scheduler_is_taken_over(running: RunningExtender) -> None:
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"}, scheduler="default-scheduler")
    assert _mutated(_admit(running, pod), pod)["spec"]["schedulerName"] == SCHEDULER


def test_updates_are_not_mutated(running: RunningExtender) -> None:
    response = _admit(running, _pod({"nvidia.com/gpu": "1"}, node="n1"), operation="UPDATE")
    assert response["allowed"] is True and "patch" not in response


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (_pod({"nvidia.com/gpu": "1"}, privileged=True), "is privileged in a pod that asks"),
        (_pod({"nvidia.com/gpu": "1"}, node="gpu-1"), "spec.nodeName is already set ('gpu-1')"),
        (
            _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "120"}),
            "'nvidia.com/gpumem-percentage', value '120'",
        ),
        (
            _pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}),
            "'nvidia.com/gpucores', value '150'",
        ),
        (_pod({"nvidia.com/gpu": "0", "nvidia.com/gpumem": "1000"}), "device count is 0"),
        (_pod({"nvidia.com/gpu": "1.5"}), "whole number"),
    ],
    ids=[
        "privileged",
        "node-name-preset",
        "percentage-over-100",
        "cores-over-100",
        "zero-count",
        "fraction",
    ],
)
def test_pods_that_can_never_run_are_denied_with_the_reason(
    running: RunningExtender, pod: dict[str, Any], message: str
) -> None:
    response = _admit(running, pod)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert message in response["status"]["message"]
    assert "patch" not in response


UID = "705ab4f5-6393-11e8-b7cc-42010a800002"


def _refusal(running: RunningExtender, body: bytes) -> dict[str, Any]:
    """POST raw bytes; the answer must be a refused AdmissionReview with HTTP 200."""
    answer = running.client.post(
        "/webhook", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    review = answer.json()
    assert review["kind"] == "AdmissionReview"
    assert review["apiVersion"] == "admission.k8s.io/v1"
    response: dict[str, Any] = review["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400 and response["status"]["reason"] == "BadRequest"
    assert response["status"]["message"].startswith("malformed AdmissionReview: ")
    assert "patch" not in response
    return response


@pytest.mark.parametrize(
    ("body", "field", "uid"),
    [
        ({**_review(_pod()), "kind": "Pod"}, "kind", UID),
        ({**_review(_pod()), "apiVersion": "v1"}, "apiVersion", UID),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request", ""),
        ({**_review(_pod()), "request": {"object": _pod()}}, "request.uid", ""),
        ({**_review(_pod()), "request": {"uid": 7}}, "request.uid", ""),
    ],
    ids=["wrong-kind", "wrong-version", "no-request", "no-uid", "uid-not-a-string"],
)
def test_malformed_reviews_are_refused_in_a_review_naming_the_field(
    running: RunningExtender, body: dict[str, Any], field: str, uid: str
) -> None:
    response = _refusal(running, json.dumps(body).encode())
    assert response["uid"] == uid
    assert f"{field}: " in response["status"]["message"]


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe\x00garbage", b'{"apiVersion": ', b"[]", b"null", b"", b"[" * 100_000],
    ids=["not-utf8", "truncated", "a-list", "null", "empty", "deep-nesting"],
)
def test_unparsable_bytes_are_refused_in_a_review_without_a_uid(
    running: RunningExtender, body: bytes
) -> None:
    assert _refusal(running, body)["uid"] == ""


def test_the_schema_documents_the_refusal_and_no_422(running: RunningExtender) -> None:
    operation = running.client.get("/openapi.json").json()["paths"]["/webhook"]["post"]
    assert "422" not in operation["responses"]
    described = operation["responses"]["200"]["description"]
    assert "allowed false" in described and "status.code 400" in described
    assert "requestBody" in operation


PRIVILEGED = {"securityContext": {"privileged": True}}


def _with(pod: dict[str, Any], kind: str, container: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(pod)
    result["spec"].setdefault(kind, []).append(container)
    return result


@pytest.mark.parametrize(
    ("pod", "where"),
    [
        (
            _with(_pod({"nvidia.com/gpu": "1"}), "containers", {"name": "proxy", **PRIVILEGED}),
            "'proxy' (/spec/containers/1)",
        ),
        (
            _with(_pod({"nvidia.com/gpu": "1"}), "initContainers", {"name": "setup", **PRIVILEGED}),
            "'setup' (/spec/initContainers/0)",
        ),
        (
            _with(
                _pod({"cpu": "1"}, init={"nvidia.com/gpu": "1"}),
                "containers",
                {"name": "agent", **PRIVILEGED},
            ),
            "'agent' (/spec/containers/1)",
        ),
        (
            _with(
                _pod({"nvidia.com/gpu": "1"}), "ephemeralContainers", {"name": "dbg", **PRIVILEGED}
            ),
            "'dbg' (/spec/ephemeralContainers/0)",
        ),
        (
            _pod({"nvidia.com/gpu": "1"}, privileged=True, labels={"hami.io/webhook": "ignore"}),
            "'main' (/spec/containers/0)",
        ),
        (
            _pod(
                {"nvidia.com/gpu": "1"}, privileged=True, annotations={"hami.io/webhook": "ignore"}
            ),
            "'main' (/spec/containers/0)",
        ),
        (
            _pod({"nvidia.com/gpu": "1"}, privileged=True, scheduler="volcano"),
            "'main' (/spec/containers/0)",
        ),
    ],
    ids=[
        "sidecar-asking-for-nothing",
        "init-container",
        "gpu-only-in-init",
        "ephemeral",
        "ignore-label",
        "ignore-annotation",
        "other-scheduler",
    ],
)
def test_a_privileged_container_anywhere_in_a_gpu_pod_is_denied(
    running: RunningExtender, pod: dict[str, Any], where: str
) -> None:
    response = _admit(running, pod)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert f"container {where} is privileged in a pod that asks for a GPU" in message
    assert "patch" not in response


def test_a_privileged_pod_asking_for_no_gpu_is_not_ours_to_judge(running: RunningExtender) -> None:
    response = _admit(running, _pod({"cpu": "1"}, privileged=True))
    assert response["allowed"] is True and "patch" not in response


def test_a_review_without_a_pod_is_denied(running: RunningExtender) -> None:
    response = _admit(running, None)
    assert response["allowed"] is False
    assert response["status"]["message"] == "request.object must be a Pod object"
