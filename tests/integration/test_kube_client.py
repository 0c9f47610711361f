"""``RealKubeClient`` over real HTTP against the test API server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from tests.support.apiserver import FakeApiServer
from tests.support.kube_contract import Harness, KubeClientContract, node, pod
from vgpu_extender.kube import objects
from vgpu_extender.kube.config import Timeouts, load_configuration
from vgpu_extender.kube.errors import KubeError
from vgpu_extender.kube.real import RealKubeClient

_ROUTES = {
    "patch_node": ("PATCH", r"^/api/v1/nodes/"),
    "create_event": ("POST", r"/events$"),
    "get_pod": ("GET", r"^/api/v1/namespaces/[^/]+/pods/[^/]+$"),
    "list_pods": ("GET", r"^/api/v1/pods$"),
    "watch_pods": ("GET", r"^/api/v1/pods$"),
    "list_pdbs": ("GET", r"^/apis/policy/v1/poddisruptionbudgets$"),
}


@pytest.fixture
def harness(apiserver: FakeApiServer, real_kube: RealKubeClient) -> Harness:
    def fail(operation: str, status: int, times: int) -> None:
        method, path = _ROUTES[operation]
        apiserver.fail_next(method, path, status, times)

    return Harness(kube=real_kube, cluster=apiserver.cluster, fail=fail)


class TestRealKubeClient(KubeClientContract):
    """The shared table, on the real client over HTTP."""


def test_binding_goes_on_the_wire_as_default_binder_sends_it(
    apiserver: FakeApiServer, real_kube: RealKubeClient
) -> None:
    uid = objects.uid(apiserver.add_pod(pod("web-0")))
    real_kube.bind_pod("default", "web-0", uid, "node-a")
    assert apiserver.bindings == [
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "web-0", "namespace": "default", "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        }
    ]
    assert ("POST", "/api/v1/namespaces/default/pods/web-0/binding") in apiserver.requests
    assert objects.node_name(apiserver.get_pod("default", "web-0")) == "node-a"


def test_list_pods_on_node_asks_the_server_to_filter(
    apiserver: FakeApiServer, real_kube: RealKubeClient
) -> None:
    apiserver.add_pod(pod("p1", node="n1"))
    apiserver.add_pod(pod("p2", node="n2"))
    assert [objects.name(p) for p in real_kube.list_pods(node="n1")] == ["p1"]
    assert apiserver.requests == [("GET", "/api/v1/pods")]


def test_patch_is_a_json_merge_patch(apiserver: FakeApiServer, real_kube: RealKubeClient) -> None:
    """A strategic-merge or JSON patch would also reach the server; the merge patch is HAMi's."""
    apiserver.add_node(node("n1", {"a": "1"}))
    apiserver.fail_next("PATCH", "/api/v1/nodes/n1", 415, message="wrong type")
    with pytest.raises(KubeError, match="wrong type") as caught:
        real_kube.patch_node_annotations("n1", {"a": "2"})
    assert caught.value.status == 415
    assert objects.annotations(real_kube.patch_node_annotations("n1", {"a": "2"})) == {"a": "2"}


def test_unreachable_server_is_a_kube_error(apiserver: FakeApiServer) -> None:
    kube = RealKubeClient.from_configuration(
        apiserver.configuration(), timeouts=Timeouts(connect_s=1.0, read_s=1.0)
    )
    apiserver.stop()
    try:
        with pytest.raises(KubeError, match="get pod default/web-0") as caught:
            kube.get_pod("default", "web-0")
        assert caught.value.status is None
    finally:
        kube.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("connect_s", 0, id="zero-connect"),
        pytest.param("read_s", -1.0, id="negative-read"),
        pytest.param("watch_slack_s", "10", id="string-slack"),
    ],
)
def test_timeouts_reject_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        Timeouts(**{field: value})  # type: ignore[arg-type]


def _write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server}}],
                "users": [{"name": "test", "user": {"token": "t"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


def test_load_configuration_from_explicit_kubeconfig(
    apiserver: FakeApiServer, tmp_path: Path
) -> None:
    config = load_configuration(
        kubeconfig=str(_write_kubeconfig(tmp_path / "config", apiserver.url))
    )
    assert config is not None and config.host == apiserver.url
    apiserver.add_node(node("n1"))
    config.no_proxy = "127.0.0.1"
    kube = RealKubeClient.from_configuration(config)
    try:
        assert [objects.name(n) for n in kube.list_nodes()] == ["n1"]
    finally:
        kube.close()


@pytest.mark.parametrize(
    ("env_file", "expected"),
    [
        pytest.param(None, None, id="nothing-found-standalone"),
        pytest.param("config", "http://127.0.0.1:1", id="kubeconfig-env"),
    ],
)
def test_load_configuration_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env_file: str | None, expected: str | None
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    target = tmp_path / "absent"
    if env_file is not None:
        target = _write_kubeconfig(tmp_path / env_file, "http://127.0.0.1:1")
    monkeypatch.setenv("KUBECONFIG", str(target))
    config = load_configuration()
    assert (config.host if config is not None else None) == expected


def test_load_configuration_bad_explicit_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(KubeError, match=r"nope\.yaml"):
        load_configuration(kubeconfig=str(missing))


def test_typed_client_without_workaround_still_fails_after_binding(
    apiserver: FakeApiServer,
) -> None:
    """The server answers a Binding with a ``Status`` as the real one does, so the pitfall shows."""
    uid = objects.uid(apiserver.add_pod(pod("web-0")))
    body = k8s.V1Binding(
        metadata=k8s.V1ObjectMeta(name="web-0", namespace="default", uid=uid),
        target=k8s.V1ObjectReference(api_version="v1", kind="Node", name="node-a"),
    )
    with k8s.ApiClient(apiserver.configuration()) as api, pytest.raises(ValueError):
        k8s.CoreV1Api(api).create_namespaced_pod_binding("web-0", "default", body)
    assert objects.node_name(apiserver.get_pod("default", "web-0")) == "node-a"
