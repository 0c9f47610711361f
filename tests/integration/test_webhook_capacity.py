"""Over HTTP: the webhook refuses what no node of the inventory could hold, even empty."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import RunningExtender, standalone_settings, start_extender


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo inventory: two nodes of 4 A100 80GB (81920 MiB), two of 2 T4."""
    server = start_extender(standalone_settings(tmp_path_factory.mktemp("demo"), demo=True))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    server = start_extender(standalone_settings(tmp_path_factory.mktemp("empty")))
    yield server
    server.stop()


def _admit(running: RunningExtender, limits: dict[str, str]) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "operation": "CREATE", "object": pod},
    }
    answer = running.client.post("/webhook", json=review)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()["response"]
    return response


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"nvidia.com/gpu": "65"},
            "nvidia.com/gpu: 65 exceeds the most devices any node has (4, node demo-a100-1)",
        ),
        (
            {"nvidia.com/gpumem": "999999"},
            "nvidia.com/gpumem: 999999 exceeds the largest device "
            "(81920 MiB, NVIDIA-NVIDIA A100-SXM4-80GB on node demo-a100-1)",
        ),
    ],
    ids=["count", "memory"],
)
def test_a_request_no_node_could_hold_is_refused_naming_the_largest(
    demo: RunningExtender, limits: dict[str, str], message: str
) -> None:
    response = _admit(demo, limits)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert message in response["status"]["message"]
    assert "%" not in response["status"]["message"]
    assert "patch" not in response


def test_the_largest_node_and_device_are_admitted(demo: RunningExtender) -> None:
    response = _admit(demo, {"nvidia.com/gpu": "4", "nvidia.com/gpumem": "81920"})
    assert response["allowed"] is True and "patch" in response


def test_with_no_node_known_any_size_is_admitted(empty: RunningExtender) -> None:
    response = _admit(empty, {"nvidia.com/gpu": "65", "nvidia.com/gpumem": "999999"})
    assert response["allowed"] is True
