"""The test API server answers the official typed client as a real API server would."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from tests.support.apiserver import FakeApiServer
from tests.support.kube_contract import node, pod
from vgpu_extender.kube.errors import NotFound


@pytest.fixture
def api(apiserver: FakeApiServer) -> Iterator[k8s.ApiClient]:
    with k8s.ApiClient(apiserver.configuration()) as client:
        yield client


@pytest.fixture
def core(api: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api)


def labelled(name: str, labels: dict[str, str], phase: str = "Running") -> dict[str, Any]:
    body = pod(name, labels=labels)
    body["status"] = {"phase": phase}
    return body


@pytest.fixture
def labelled_pods(apiserver: FakeApiServer) -> None:
    apiserver.add_pod(labelled("a", {"app": "web", "tier": "front"}))
    apiserver.add_pod(labelled("b", {"app": "db"}, phase="Pending"))
    apiserver.add_pod(labelled("c", {}, phase="Succeeded"))
    apiserver.add_pod(pod("d", namespace="other"))


@pytest.mark.parametrize(
    ("label_selector", "field_selector", "expected"),
    [
        pytest.param(None, None, ["a", "b", "c"], id="namespace-only"),
        pytest.param("app=web", None, ["a"], id="equals"),
        pytest.param("app==db", None, ["b"], id="double-equals"),
        pytest.param("app!=web", None, ["b", "c"], id="not-equals"),
        pytest.param("app", None, ["a", "b"], id="exists"),
        pytest.param("!app", None, ["c"], id="not-exists"),
        pytest.param("app in (web,db),tier", None, ["a"], id="in-and-exists"),
        pytest.param("app notin (web)", None, ["b", "c"], id="notin"),
        pytest.param(None, "status.phase!=Succeeded", ["a", "b"], id="phase-field"),
        pytest.param("app", "metadata.name=b", ["b"], id="label-and-field"),
    ],
)
@pytest.mark.usefixtures("labelled_pods")
def test_selectors(
    core: k8s.CoreV1Api, label_selector: str | None, field_selector: str | None, expected: list[str]
) -> None:
    kwargs: dict[str, Any] = {"label_selector": label_selector, "field_selector": field_selector}
    found = core.list_namespaced_pod("default", **{k: v for k, v in kwargs.items() if v})
    assert [p.metadata.name if p.metadata else "" for p in found.items] == expected


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        pytest.param({"field_selector": "spec.hostIP=1"}, "field label not supported", id="field"),
        pytest.param({"label_selector": "a b c"}, "invalid label selector", id="label"),
        pytest.param({"watch": True, "resource_version": "abc"}, "resourceVersion", id="version"),
    ],
)
def test_bad_queries_are_400(core: k8s.CoreV1Api, kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ApiException) as caught:
        core.list_pod_for_all_namespaces(_preload_content=False, **kwargs)
    assert caught.value.status == 400
    assert words in str(caught.value.body)


def test_official_watch_stream_works(apiserver: FakeApiServer, core: k8s.CoreV1Api) -> None:
    apiserver.add_pod(pod("web-0"))
    watcher = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    seen = []
    events = watcher.stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_pod, "default", timeout_seconds=2
    )
    for event in events:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1:
            apiserver.set_pod_phase("default", "web-0", "Running")
        else:
            watcher.stop()  # type: ignore[no-untyped-call]
    assert seen == [("ADDED", "web-0"), ("MODIFIED", "web-0")]
    assert (
        watcher.resource_version
        == apiserver.get_pod("default", "web-0")["metadata"]["resourceVersion"]
    )


def test_watch_follows_the_selection(apiserver: FakeApiServer, core: k8s.CoreV1Api) -> None:
    """A pod moving into a field selection is ADDED, moving out of it is DELETED."""
    apiserver.add_pod(pod("web-0"))
    since = apiserver.cluster.resource_version
    apiserver.cluster.bind("default", "web-0", "", "n1")
    apiserver.set_pod_phase("default", "web-0", "Running")
    apiserver.cluster.patch("pods", "default", "web-0", {"spec": {"nodeName": "n2"}})
    events = k8s_watch.Watch().stream(  # type: ignore[no-untyped-call]
        core.list_pod_for_all_namespaces,
        field_selector="spec.nodeName=n1",
        resource_version=since,
        timeout_seconds=1,
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


@pytest.mark.parametrize("path", ["pods/web-0/binding", "bindings"])
def test_a_binding_sets_its_annotations_on_the_pod(
    apiserver: FakeApiServer, api: k8s.ApiClient, path: str
) -> None:
    """Both Binding endpoints set the node and add the Binding's annotations at once."""
    apiserver.add_pod(pod("web-0", annotations={"keep": "yes"}))
    body = {
        "metadata": {"name": "web-0", "annotations": {"hami.io/vgpu-node": "n1"}},
        "target": {"name": "n1"},
    }
    request = api.param_serialize(
        method="POST",
        resource_path=f"/api/v1/namespaces/default/{path}",
        header_params={"Content-Type": "application/json"},
        body=body,
    )
    response = api.call_api(*request)
    response.read()  # type: ignore[no-untyped-call]
    assert response.status == 201
    stored = apiserver.get_pod("default", "web-0")
    assert stored["spec"]["nodeName"] == "n1"
    assert stored["metadata"]["annotations"] == {"keep": "yes", "hami.io/vgpu-node": "n1"}


def test_events_in_both_groups_are_recorded(apiserver: FakeApiServer, api: k8s.ApiClient) -> None:
    k8s.EventsV1Api(api).create_namespaced_event(
        "default",
        k8s.EventsV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="web-0."),
            regarding=k8s.V1ObjectReference(kind="Pod", name="web-0", namespace="default"),
            reason="Scheduled",
            note="bound",
            type="Normal",
            action="Binding",
            reporting_controller="test",
            reporting_instance="test",
            event_time=datetime(2026, 8, 1, 6, 0, tzinfo=UTC),
        ),
    )
    k8s.CoreV1Api(api).create_namespaced_event(
        "default",
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name="web-0.1"),
            involved_object=k8s.V1ObjectReference(kind="Pod", name="web-0"),
            reason="BindingSucceed",
        ),
    )
    assert [e["reason"] for e in apiserver.events] == ["Scheduled", "BindingSucceed"]
    assert apiserver.events[0]["metadata"]["name"].startswith("web-0.")
    assert {e["metadata"]["namespace"] for e in apiserver.events} == {"default"}


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status"),
    [
        pytest.param("GET", "/api/v1/secrets", None, {}, 404, id="unknown-path"),
        pytest.param("DELETE", "/api/v1/nodes", None, {}, 405, id="method-not-allowed"),
        pytest.param(
            "PATCH",
            "/api/v1/nodes/n1",
            [{"op": "add", "path": "/metadata/labels", "value": {}}],
            {"Content-Type": "application/json-patch+json"},
            415,
            id="json-patch",
        ),
        pytest.param(
            "PATCH",
            "/api/v1/nodes/n1",
            {"metadata": {"uid": "not-it"}},
            {"Content-Type": "application/merge-patch+json"},
            409,
            id="uid-precondition",
        ),
        pytest.param(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/x",
            {"metadata": {"name": "y"}},
            {"Content-Type": "application/json"},
            400,
            id="name-mismatch",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/default/pods/web-0/binding",
            {"metadata": {"name": "web-1"}, "target": {"name": "n1"}},
            {"Content-Type": "application/json"},
            400,
            id="binding-name-mismatch",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/default/pods/web-0/binding",
            {"metadata": {"annotations": {"a": 1}}, "target": {"name": "n1"}},
            {"Content-Type": "application/json"},
            400,
            id="binding-annotation-not-a-string",
        ),
    ],
)
def test_requests_the_server_refuses(
    apiserver: FakeApiServer,
    api: k8s.ApiClient,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str],
    status: int,
) -> None:
    apiserver.add_node(node("n1"))
    apiserver.add_pod(pod("web-0"))
    request = api.param_serialize(
        method=method, resource_path=path, header_params=headers, body=body
    )
    response = api.call_api(*request)
    response.read()  # type: ignore[no-untyped-call]
    assert response.status == status
    assert response.data is not None and b'"kind":"Status"' in response.data
    assert apiserver.get_node("n1")["metadata"].get("labels") is None
    assert apiserver.get_pod("default", "web-0")["spec"].get("nodeName") is None


def test_fail_next_counts_and_logs(apiserver: FakeApiServer, core: k8s.CoreV1Api) -> None:
    apiserver.add_node(node("n1"))
    apiserver.fail_next("get", r"^/api/v1/nodes/n1$", 503, times=2, message="try later")
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core.read_node("n1")
        assert caught.value.status == 503 and "try later" in str(caught.value.body)
    meta = core.read_node("n1").metadata
    assert meta is not None and meta.name == "n1"
    assert apiserver.requests == [("GET", "/api/v1/nodes/n1")] * 3


@pytest.mark.parametrize(
    ("status", "times", "message"),
    [
        pytest.param(200, 1, "HTTP error code", id="success-code"),
        pytest.param(500, 0, "at least 1", id="zero-times"),
    ],
)
def test_fail_next_rejects(apiserver: FakeApiServer, status: int, times: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apiserver.fail_next("GET", ".", status, times)


def test_stop_ends_open_watches_and_connections() -> None:
    server = FakeApiServer().start()
    server.add_pod(pod("web-0"))
    api = k8s.ApiClient(server.configuration())
    stream = k8s_watch.Watch().stream(  # type: ignore[no-untyped-call]
        k8s.CoreV1Api(api).list_pod_for_all_namespaces, timeout_seconds=600
    )
    assert next(stream)["type"] == "ADDED"  # the watch is open for ten minutes
    server.stop()
    assert list(stream) == []  # the server ended it
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
    api.close()  # type: ignore[no-untyped-call]


def test_default_patch_and_delete_of_the_typed_client(
    apiserver: FakeApiServer, core: k8s.CoreV1Api
) -> None:
    """The typed client sends a strategic merge patch by default; it is applied as a merge."""
    apiserver.add_pod(pod("web-0", labels={"keep": "1", "drop": "2"}))
    patched = core.patch_namespaced_pod(
        "web-0", "default", {"metadata": {"labels": {"drop": None, "new": "3"}}}
    )
    assert patched.metadata is not None and patched.metadata.labels == {"keep": "1", "new": "3"}
    core.delete_namespaced_pod("web-0", "default")
    with pytest.raises(NotFound) as caught:
        apiserver.get_pod("default", "web-0")
    assert "not found" in str(caught.value)
