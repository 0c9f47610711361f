"""Pure pieces of the Kubernetes seam: field readers, lock values, bodies, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from vgpu_extender.kube import bodies, objects
from vgpu_extender.kube.errors import (
    AlreadyBound,
    Conflict,
    KubeError,
    MalformedObject,
    NotFound,
    UidMismatch,
    WatchExpired,
    error_from_status,
)
from vgpu_extender.kube.memory import InMemoryCluster, merge_patch
from vgpu_extender.kube.node_lock import Backoff, LockValue, NodeLock, _go_duration

POD: dict[str, Any] = {
    "metadata": {
        "name": "web-0",
        "namespace": "ml",
        "uid": "u-1",
        "resourceVersion": "42",
        "annotations": {"hami.io/vgpu-node": "n1"},
        "labels": {"app": "web"},
        "deletionTimestamp": "2026-08-01T06:00:00Z",
    },
    "spec": {"nodeName": "n1", "schedulerName": "vgpu"},
    "status": {"phase": "Failed"},
}


@pytest.mark.parametrize(
    ("reader", "obj", "expected"),
    [
        pytest.param(objects.name, POD, "web-0", id="name"),
        pytest.param(objects.namespace, POD, "ml", id="namespace"),
        pytest.param(objects.uid, POD, "u-1", id="uid"),
        pytest.param(objects.resource_version, POD, "42", id="resource-version"),
        pytest.param(objects.annotations, POD, {"hami.io/vgpu-node": "n1"}, id="annotations"),
        pytest.param(objects.labels, POD, {"app": "web"}, id="labels"),
        pytest.param(objects.deletion_timestamp, POD, "2026-08-01T06:00:00Z", id="deletion"),
        pytest.param(objects.is_deleting, POD, True, id="is-deleting"),
        pytest.param(objects.pod_key, POD, "ml/web-0", id="key"),
        pytest.param(objects.pod_phase, POD, "Failed", id="phase"),
        pytest.param(objects.is_terminal, POD, True, id="terminal"),
        pytest.param(objects.node_name, POD, "n1", id="node-name"),
        pytest.param(objects.scheduler_name, POD, "vgpu", id="scheduler"),
        pytest.param(objects.annotations, {}, {}, id="empty-annotations"),
        pytest.param(objects.node_name, {"spec": None}, "", id="null-spec"),
        pytest.param(objects.deletion_timestamp, {"metadata": {}}, None, id="not-deleting"),
        pytest.param(objects.is_terminal, {"status": {"phase": "Running"}}, False, id="running"),
        pytest.param(
            objects.node_unschedulable, {"spec": {"unschedulable": True}}, True, id="cordon"
        ),
        pytest.param(objects.node_unschedulable, {}, False, id="schedulable"),
    ],
)
def test_readers(reader: Any, obj: dict[str, Any], expected: object) -> None:
    assert reader(obj) == expected


@pytest.mark.parametrize(
    ("reader", "obj", "field"),
    [
        pytest.param(objects.name, {"metadata": []}, "metadata", id="metadata-list"),
        pytest.param(objects.name, {"metadata": {"name": 3}}, "metadata.name", id="int-name"),
        pytest.param(
            objects.annotations,
            {"metadata": {"annotations": {"a": 1}}},
            "metadata.annotations['a']",
            id="int-annotation",
        ),
        pytest.param(objects.labels, {"metadata": {"labels": "x"}}, "metadata.labels", id="labels"),
        pytest.param(objects.pod_phase, {"status": {"phase": 1}}, "status.phase", id="phase"),
        pytest.param(
            objects.node_unschedulable,
            {"spec": {"unschedulable": "yes"}},
            "spec.unschedulable",
            id="unschedulable",
        ),
    ],
)
def test_readers_name_malformed_fields(reader: Any, obj: dict[str, Any], field: str) -> None:
    with pytest.raises(MalformedObject) as caught:
        reader(obj)
    assert caught.value.field == field
    assert field in str(caught.value)


T = datetime(2026, 8, 1, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("2026-08-01T06:00:00Z,ns,pod-a", LockValue(T, "ns", "pod-a"), id="current"),
        pytest.param("2026-08-01T06:00:00Z", LockValue(T), id="legacy"),
        pytest.param(
            "2026-08-01T08:00:00+02:00,ns,pod-a", LockValue(T, "ns", "pod-a"), id="offset"
        ),
    ],
)
def test_lock_value_parse(raw: str, expected: LockValue) -> None:
    parsed = LockValue.parse(raw)
    assert parsed == expected
    assert parsed.taken_at == T


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        pytest.param("2026-08-01T06:00:00Z,ns", "'<RFC3339>,<namespace>,<pod>'", id="two-parts"),
        pytest.param("yesterday,ns,pod", "RFC3339", id="not-a-time"),
        pytest.param("2026-08-01T06:00:00,ns,pod", "zone", id="no-zone"),
    ],
)
def test_lock_value_parse_rejects(raw: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        LockValue.parse(raw)
    assert words in str(caught.value) and repr(raw) in str(caught.value)


def test_lock_value_format_is_hami_literal() -> None:
    taken = datetime(2026, 8, 1, 8, 0, 0, 123, tzinfo=timezone(timedelta(hours=2)))
    assert LockValue(taken, "ns", "pod-a").format() == "2026-08-01T06:00:00Z,ns,pod-a"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        pytest.param(timedelta(minutes=5), "5m0s", id="five-minutes"),
        pytest.param(timedelta(seconds=28), "28s", id="seconds"),
        pytest.param(timedelta(hours=1, seconds=3), "1h0m3s", id="hours"),
    ],
)
def test_go_duration(delta: timedelta, text: str) -> None:
    assert _go_duration(delta) == text


@pytest.mark.parametrize(
    ("backoff", "count", "low", "high"),
    [
        pytest.param(Backoff(), 4, [0.1, 0.2, 0.4, 0.8], [0.15, 0.3, 0.6, 1.2], id="hami"),
        pytest.param(Backoff(steps=1), 0, [], [], id="one-try"),
        pytest.param(Backoff(steps=3, jitter=0), 2, [0.1, 0.2], [0.1, 0.2], id="no-jitter"),
    ],
)
def test_backoff_delays(backoff: Backoff, count: int, low: list[float], high: list[float]) -> None:
    delays = backoff.delays()
    assert len(delays) == count
    for delay, lo, hi in zip(delays, low, high, strict=True):
        assert lo - 1e-9 <= delay <= hi + 1e-9


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"steps": 0}, id="zero-steps"),
        pytest.param({"factor": 0.5}, id="shrinking"),
        pytest.param({"initial_s": -1}, id="negative"),
    ],
)
def test_backoff_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


def test_node_lock_rejects_bad_arguments() -> None:
    from vgpu_extender.kube.fake import FakeKubeClient

    with pytest.raises(ValueError, match="timeout"):
        NodeLock(FakeKubeClient(), timeout=timedelta(0))
    with pytest.raises(ValueError, match="namespace and pod"):
        NodeLock(FakeKubeClient()).acquire("n1", "", "web-0")


@pytest.mark.parametrize(
    ("status", "http_status", "error", "node"),
    [
        pytest.param({"code": 404, "reason": "NotFound"}, 404, NotFound, None, id="404"),
        pytest.param({"code": 410, "reason": "Expired"}, None, WatchExpired, None, id="410-event"),
        pytest.param(None, 410, WatchExpired, None, id="410-no-body"),
        pytest.param({"code": 409, "message": "modified"}, 409, Conflict, None, id="409"),
        pytest.param(
            {"code": 409, "message": 'pod p is already assigned to node "n1"'},
            409,
            AlreadyBound,
            "n1",
            id="409-bound",
        ),
        pytest.param(
            {"code": 409, "message": "Precondition failed: UID in precondition: a"},
            409,
            UidMismatch,
            None,
            id="409-uid",
        ),
        pytest.param({"message": "boom"}, 500, KubeError, None, id="500"),
    ],
)
def test_error_from_status(
    status: dict[str, Any] | None, http_status: int | None, error: type[KubeError], node: str | None
) -> None:
    got = error_from_status(status, http_status=http_status, context="do thing")
    assert type(got) is error
    assert str(got).startswith("do thing: ")
    assert got.status == (status or {}).get("code", http_status)
    if isinstance(got, AlreadyBound):
        assert got.node == node


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param({"a": 1}, {"b": 2}, {"a": 1, "b": 2}, id="add"),
        pytest.param(
            {"a": {"x": 1, "y": 2}}, {"a": {"y": None}}, {"a": {"x": 1}}, id="nested-delete"
        ),
        pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="lists-replace"),
        pytest.param({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}, id="scalar-to-object"),
    ],
)
def test_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("call", "words"),
    [
        pytest.param(
            lambda: bodies.metadata_patch(annotations={"a": "1"}, resource_version=""),
            "resource_version",
            id="empty-version",
        ),
        pytest.param(
            lambda: bodies.metadata_patch(annotations={"a": "1"}, labels={"l": 2}),  # type: ignore[dict-item]
            "labels['l']",
            id="int-label",
        ),
        pytest.param(lambda: bodies.binding("", "p", "", "n"), "namespace", id="no-namespace"),
        pytest.param(
            lambda: bodies.pod_event(
                namespace="d",
                pod="p",
                uid="",
                reason="r",
                message="m",
                type="Normal",
                component="c",
                now=datetime(2026, 1, 1),
            ),
            "timezone",
            id="naive-time",
        ),
        pytest.param(lambda: InMemoryCluster(history_limit=0), "history_limit", id="history"),
    ],
)
def test_bodies_reject_bad_input(call: Any, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        call()
    assert words in str(caught.value)


def test_event_message_is_capped() -> None:
    event = bodies.pod_event(
        namespace="d",
        pod="p",
        uid="u",
        reason="r",
        message="x" * 5000,
        type="Warning",
        component="c",
        now=T,
    )
    assert len(event["message"]) == bodies.MAX_EVENT_MESSAGE
    assert event["firstTimestamp"] == "2026-08-01T06:00:00Z"


def test_history_limit_expires_old_versions() -> None:
    cluster = InMemoryCluster(history_limit=2)
    since = cluster.resource_version
    for i in range(3):
        cluster.put("nodes", {"metadata": {"name": f"n{i}"}})
    with pytest.raises(WatchExpired, match="too old resource version"):
        next(iter(cluster.watch("nodes", since, 1)))
    recent = str(int(cluster.resource_version) - 1)
    assert [e[1]["metadata"]["name"] for e in cluster.watch("nodes", recent, 0)] == ["n2"]
