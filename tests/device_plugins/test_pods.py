"""Reading pods' JSON and the node lock's value."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugins.nodelock import NodeLock, held_by, parse_lock
from device_plugins.pods import ContainerView, PodFormatError, pod_view


def test_pod_view_reads_init_containers_first_and_literal_env() -> None:
    pod = pod_view(
        {
            "metadata": {
                "namespace": "ml",
                "name": "train",
                "uid": "u1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {"a": "b"},
            },
            "spec": {
                "nodeName": "node-a",
                "initContainers": [{"name": "setup"}],
                "containers": [
                    {
                        "name": "main",
                        "env": [
                            {"name": "CUDA_DISABLE_CONTROL", "value": "true"},
                            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {}}},
                        ],
                    }
                ],
            },
            "status": {"phase": "Pending"},
        }
    )
    assert pod.key == "ml/train"
    assert (pod.uid, pod.phase, pod.node_name, pod.annotations) == (
        "u1",
        "Pending",
        "node-a",
        {"a": "b"},
    )
    assert pod.containers == (
        ContainerView("setup", True, {}),
        ContainerView("main", False, {"CUDA_DISABLE_CONTROL": "true"}),
    )


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param({"metadata": "x"}, "metadata", id="metadata-not-object"),
        pytest.param({"metadata": {"name": ""}}, "metadata.name", id="no-name"),
        pytest.param(
            {"metadata": {"name": "p", "annotations": {"a": 1}}},
            "metadata.annotations['a']",
            id="annotation-not-string",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": {"containers": {}}},
            "spec.containers",
            id="containers-not-list",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "status": {"phase": 3}},
            "status.phase",
            id="phase-not-string",
        ),
    ],
)
def test_pod_view_names_the_bad_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(PodFormatError, match=repr(field).replace("[", r"\[")):
        pod_view(obj)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param("", None, id="empty"),
        pytest.param(
            "2026-08-01T06:00:00Z,ns,pod-a",
            NodeLock("2026-08-01T06:00:00Z", "ns", "pod-a"),
            id="current",
        ),
        pytest.param("2026-08-01T06:00:00Z", NodeLock("2026-08-01T06:00:00Z"), id="legacy"),
    ],
)
def test_parse_lock(value: str | None, expected: NodeLock | None) -> None:
    assert parse_lock(value) == expected


@pytest.mark.parametrize(
    ("lock", "held"),
    [
        pytest.param(NodeLock("t", "ns", "pod-a"), True, id="same-pod"),
        pytest.param(NodeLock("t", "ns", "pod-b"), False, id="other-pod"),
        pytest.param(NodeLock("t"), True, id="legacy-names-nobody"),
    ],
)
def test_held_by(lock: NodeLock, held: bool) -> None:
    assert held_by("ns", "pod-a")(lock) is held
