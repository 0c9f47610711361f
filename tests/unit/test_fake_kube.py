"""The in-memory ``FakeKubeClient`` passes the same contract as the real client."""

from __future__ import annotations

import pytest

from tests.support.kube_contract import Harness, KubeClientContract, pod
from vgpu_extender.kube.errors import KubeError, NotFound, error_from_status
from vgpu_extender.kube.fake import FakeKubeClient

_METHODS = {
    "patch_node": "patch_node_annotations",
    "create_event": "create_event",
    "get_pod": "get_pod",
    "list_pods": "list_pods",
    "watch_pods": "watch_pods",
    "list_pdbs": "list_pdbs",
}


@pytest.fixture
def fake() -> FakeKubeClient:
    return FakeKubeClient()


@pytest.fixture
def harness(fake: FakeKubeClient) -> Harness:
    def fail(operation: str, status: int, times: int) -> None:
        error = error_from_status(
            {"code": status, "message": "injected failure"},
            http_status=status,
            context=operation,
        )
        fake.fail_next(_METHODS[operation], error, times)

    return Harness(kube=fake, cluster=fake.cluster, fail=fail)


class TestFakeKubeClient(KubeClientContract):
    """The shared table, on the fake."""


@pytest.mark.parametrize(
    ("operation", "times", "message"),
    [
        pytest.param("no_such_method", 1, "KubeClient method name", id="unknown-operation"),
        pytest.param("_enter", 1, "KubeClient method name", id="private-method"),
        pytest.param("get_pod", 0, "times must be at least 1", id="zero-times"),
    ],
)
def test_fail_next_rejects(fake: FakeKubeClient, operation: str, times: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fake.fail_next(operation, KubeError("boom"), times)


def test_helpers_change_state_and_log_calls(fake: FakeKubeClient) -> None:
    fake.add_pod(pod("web-0"))
    fake.set_pod_phase("default", "web-0", "Succeeded")
    got = fake.get_pod("default", "web-0")
    assert got is not None and got["status"]["phase"] == "Succeeded"
    fake.delete_pod("default", "web-0")
    assert fake.get_pod("default", "web-0") is None
    assert fake.calls == ["get_pod", "get_pod"]
    with pytest.raises(NotFound, match="web-0"):
        fake.delete_pod("default", "web-0")


def test_returned_objects_are_copies(fake: FakeKubeClient) -> None:
    fake.add_pod(pod("web-0", annotations={"a": "1"}))
    got = fake.get_pod("default", "web-0")
    assert got is not None
    got["metadata"]["annotations"]["a"] = "changed"
    again = fake.get_pod("default", "web-0")
    assert again is not None and again["metadata"]["annotations"] == {"a": "1"}
