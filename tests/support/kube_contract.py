"""The behaviour every ``KubeClient`` shares, as tests over a ``harness`` fixture.

``tests/integration/test_kube_client.py`` runs them on the real client over HTTP
against the test API server; ``tests/unit/test_fake_kube.py`` runs them on the
in-memory fake. Both provide a ``harness`` fixture; these test functions are
imported into those modules, so one table checks both implementations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vgpu_extender.kube import objects
from vgpu_extender.kube.client import KubeClient, WatchEvent
from vgpu_extender.kube.errors import (
    AlreadyBound,
    Conflict,
    KubeError,
    NodeLockContention,
    NotFound,
    UidMismatch,
    WatchExpired,
)
from vgpu_extender.kube.memory import InMemoryCluster
from vgpu_extender.kube.node_lock import LOCK_ANNOTATION, Backoff, LockValue, NodeLock

NOW = datetime(2026, 8, 1, 6, 0, 0, tzinfo=UTC)
OPERATIONS = ("patch_node", "create_event", "get_pod", "list_pods", "watch_pods", "list_pdbs")


@dataclass
class Harness:
    """A client under test, the store behind it, and a way to make one operation fail.

    ``fail(operation, status, times)`` makes the next calls of ``operation`` (one of
    :data:`OPERATIONS`) fail as if the API server answered ``status``.
    """

    kube: KubeClient
    cluster: InMemoryCluster
    fail: Callable[[str, int, int], None]


def pod(name: str, *, namespace: str = "default", node: str = "", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace, **extra}, "spec": spec}


def node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": dict(annotations or {})}}


def take(events: Iterator[WatchEvent], count: int) -> list[tuple[str, str]]:
    """The first ``count`` events as (type, name), then close the watch."""
    seen: list[tuple[str, str]] = []
    try:
        for event_type, obj in events:
            seen.append((event_type, objects.name(obj)))
            if len(seen) == count:
                break
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return seen


def make_lock(harness: Harness, **kwargs: Any) -> NodeLock:
    return NodeLock(harness.kube, clock=lambda: NOW, sleep=lambda _s: None, **kwargs)


def lock_of(harness: Harness, name: str = "n1") -> str | None:
    return objects.annotations(harness.cluster.require("nodes", "", name)).get(LOCK_ANNOTATION)


MINE = f"{NOW:%Y-%m-%dT%H:%M:%SZ},default,web-0"


class KubeClientContract:
    """Subclass as ``TestXxx`` next to a ``harness`` fixture to run the suite on a client."""

    # ----- pods ---------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("namespace", "name", "found"),
        [
            pytest.param("default", "web-0", True, id="existing"),
            pytest.param("default", "absent", False, id="missing-name"),
            pytest.param("other", "web-0", False, id="other-namespace"),
        ],
    )
    def test_get_pod(self, harness: Harness, namespace: str, name: str, found: bool) -> None:
        stored = harness.cluster.put("pods", pod("web-0"))
        got = harness.kube.get_pod(namespace, name)
        if found:
            assert got is not None
            assert objects.uid(got) == objects.uid(stored)
            assert objects.resource_version(got) == objects.resource_version(stored)
        else:
            assert got is None

    @pytest.mark.parametrize(
        ("node_filter", "expected"),
        [
            pytest.param(None, ["a/p1", "b/p2", "b/p3"], id="all-namespaces"),
            pytest.param("n1", ["a/p1"], id="on-node"),
            pytest.param("n9", [], id="node-without-pods"),
        ],
    )
    def test_list_pods(
        self, harness: Harness, node_filter: str | None, expected: list[str]
    ) -> None:
        harness.cluster.put("pods", pod("p2", namespace="b", node="n2"))
        harness.cluster.put("pods", pod("p1", namespace="a", node="n1"))
        harness.cluster.put("pods", pod("p3", namespace="b"))
        listing = harness.kube.list_pods_with_version(node=node_filter)
        assert [objects.pod_key(p) for p in listing.items] == expected
        assert listing.resource_version == harness.cluster.resource_version
        assert [objects.pod_key(p) for p in harness.kube.list_pods(node=node_filter)] == expected

    @pytest.mark.parametrize(
        ("annotations", "labels", "want_annotations", "want_labels"),
        [
            pytest.param(
                {"hami.io/vgpu-node": "n1"},
                None,
                {"keep": "yes", "drop": "x", "hami.io/vgpu-node": "n1"},
                {"app": "web"},
                id="add-annotation",
            ),
            pytest.param(
                {"drop": None}, None, {"keep": "yes"}, {"app": "web"}, id="remove-annotation"
            ),
            pytest.param(
                {"keep": "changed"},
                {"hami.io/vgpu-node": "n1", "app": None},
                {"keep": "changed", "drop": "x"},
                {"hami.io/vgpu-node": "n1"},
                id="annotation-and-labels",
            ),
        ],
    )
    def test_patch_pod_annotations(
        self,
        harness: Harness,
        annotations: dict[str, str | None],
        labels: dict[str, str | None] | None,
        want_annotations: dict[str, str],
        want_labels: dict[str, str],
    ) -> None:
        before = harness.cluster.put(
            "pods",
            pod("web-0", annotations={"keep": "yes", "drop": "x"}, labels={"app": "web"}),
        )
        returned = harness.kube.patch_pod_annotations("default", "web-0", annotations, labels)
        stored = harness.cluster.require("pods", "default", "web-0")
        assert objects.annotations(stored) == want_annotations
        assert objects.labels(stored) == want_labels
        assert objects.annotations(returned) == want_annotations
        assert int(objects.resource_version(stored)) > int(objects.resource_version(before))

    @pytest.mark.parametrize(
        ("name", "annotations", "error", "words"),
        [
            pytest.param(
                "absent", {"a": "b"}, NotFound, ["default/absent", "not found"], id="missing"
            ),
            pytest.param("web-0", {"a": 5}, ValueError, ["annotations['a']", "5"], id="int-value"),
            pytest.param("web-0", {"": "x"}, ValueError, ["annotations key", "''"], id="empty-key"),
        ],
    )
    def test_patch_pod_annotations_rejects(
        self,
        harness: Harness,
        name: str,
        annotations: Any,
        error: type[Exception],
        words: list[str],
    ) -> None:
        harness.cluster.put("pods", pod("web-0", annotations={"keep": "yes"}))
        with pytest.raises(error) as caught:
            harness.kube.patch_pod_annotations("default", name, annotations)
        for word in words:
            assert word in str(caught.value)
        assert objects.annotations(harness.cluster.require("pods", "default", "web-0")) == {
            "keep": "yes"
        }

    # ----- binding ------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("uid", "bound_to", "error", "final_node"),
        [
            pytest.param("right", "", None, "node-a", id="success-with-uid"),
            pytest.param("", "", None, "node-a", id="success-without-uid"),
            pytest.param("right", "node-b", AlreadyBound, "node-b", id="already-bound"),
            pytest.param("wrong-uid", "", UidMismatch, "", id="uid-mismatch"),
        ],
    )
    def test_bind_pod(
        self,
        harness: Harness,
        uid: str,
        bound_to: str,
        error: type[Exception] | None,
        final_node: str,
    ) -> None:
        stored = harness.cluster.put("pods", pod("web-0", node=bound_to))
        ask_uid = objects.uid(stored) if uid == "right" else uid
        if error is None:
            harness.kube.bind_pod("default", "web-0", ask_uid, "node-a")
            assert harness.cluster.bindings[-1]["target"] == {
                "apiVersion": "v1",
                "kind": "Node",
                "name": "node-a",
            }
            assert harness.cluster.bindings[-1]["metadata"].get("uid", "") == ask_uid
        else:
            with pytest.raises(error) as caught:
                harness.kube.bind_pod("default", "web-0", ask_uid, "node-a")
            assert "default/web-0" in str(caught.value)
            assert isinstance(caught.value, Conflict) and caught.value.status == 409
            if isinstance(caught.value, AlreadyBound):
                assert caught.value.node == bound_to
            assert harness.cluster.bindings == []
        after = harness.cluster.require("pods", "default", "web-0")
        assert objects.node_name(after) == final_node

    def test_bind_twice_second_is_already_bound(self, harness: Harness) -> None:
        uid = objects.uid(harness.cluster.put("pods", pod("web-0")))
        harness.kube.bind_pod("default", "web-0", uid, "node-a")
        with pytest.raises(AlreadyBound) as caught:
            harness.kube.bind_pod("default", "web-0", uid, "node-a")
        assert caught.value.node == "node-a"
        assert len(harness.cluster.bindings) == 1

    def test_bind_pod_sets_annotations_with_the_node(self, harness: Harness) -> None:
        """One update, as the API server's setPodHostAndAnnotations makes it.

        Keys are set or overwritten, none removed; one new version, one watch event.
        """
        before = harness.cluster.put(
            "pods", pod("web-0", annotations={"keep": "yes", "hami.io/vgpu-node": "stale"})
        )
        wanted = {"hami.io/vgpu-node": "node-a", "hami.io/bind-phase": "allocating"}
        harness.kube.bind_pod("default", "web-0", objects.uid(before), "node-a", annotations=wanted)
        after = harness.cluster.require("pods", "default", "web-0")
        assert objects.node_name(after) == "node-a"
        assert objects.annotations(after) == {"keep": "yes", **wanted}
        assert harness.cluster.bindings[-1]["metadata"]["annotations"] == wanted
        assert int(objects.resource_version(after)) == int(objects.resource_version(before)) + 1
        [(event_type, seen)] = list(
            harness.kube.watch_pods(objects.resource_version(before), timeout_s=1)
        )
        assert event_type == "MODIFIED"
        assert objects.node_name(seen) == "node-a"
        assert objects.annotations(seen) == objects.annotations(after)

    @pytest.mark.parametrize(
        ("uid", "bound_to", "error"),
        [
            pytest.param("right", "node-b", AlreadyBound, id="already-bound"),
            pytest.param("wrong-uid", "", UidMismatch, id="uid-mismatch"),
        ],
    )
    def test_refused_binding_changes_no_annotation(
        self, harness: Harness, uid: str, bound_to: str, error: type[Exception]
    ) -> None:
        before = harness.cluster.put(
            "pods", pod("web-0", node=bound_to, annotations={"hami.io/vgpu-node": bound_to})
        )
        ask_uid = objects.uid(before) if uid == "right" else uid
        with pytest.raises(error):
            harness.kube.bind_pod(
                "default", "web-0", ask_uid, "node-a", annotations={"hami.io/vgpu-node": "node-a"}
            )
        after = harness.cluster.require("pods", "default", "web-0")
        assert objects.annotations(after) == {"hami.io/vgpu-node": bound_to}
        assert objects.resource_version(after) == objects.resource_version(before)
        assert harness.cluster.bindings == []

    @pytest.mark.parametrize(
        ("annotations", "words"),
        [
            pytest.param({"a": None}, ["annotations['a']", "a string", "None"], id="none-value"),
            pytest.param({"a": 5}, ["annotations['a']", "5"], id="int-value"),
            pytest.param({"": "x"}, ["annotations key", "''"], id="empty-key"),
        ],
    )
    def test_bind_pod_rejects_bad_annotations(
        self, harness: Harness, annotations: Any, words: list[str]
    ) -> None:
        harness.cluster.put("pods", pod("web-0"))
        with pytest.raises(ValueError) as caught:
            harness.kube.bind_pod("default", "web-0", "", "node-a", annotations=annotations)
        for word in words:
            assert word in str(caught.value)
        assert objects.node_name(harness.cluster.require("pods", "default", "web-0")) == ""
        assert harness.cluster.bindings == []

    @pytest.mark.parametrize(
        ("name", "target", "error", "words"),
        [
            pytest.param(
                "absent", "node-a", NotFound, ["default/absent", "not found"], id="missing-pod"
            ),
            pytest.param("web-0", "", ValueError, ["binding node", "''"], id="empty-node"),
        ],
    )
    def test_bind_pod_rejects(
        self, harness: Harness, name: str, target: str, error: type[Exception], words: list[str]
    ) -> None:
        harness.cluster.put("pods", pod("web-0"))
        with pytest.raises(error) as caught:
            harness.kube.bind_pod("default", name, "", target)
        for word in words:
            assert word in str(caught.value)
        assert harness.cluster.bindings == []

    # ----- events -------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("event_type", "fail_status", "recorded"),
        [
            pytest.param("Normal", None, True, id="normal"),
            pytest.param("Warning", None, True, id="warning"),
            pytest.param("Sideways", None, False, id="bad-type-logged"),
            pytest.param("Normal", 500, False, id="server-error-logged"),
        ],
    )
    def test_create_event(
        self, harness: Harness, event_type: Any, fail_status: int | None, recorded: bool
    ) -> None:
        if fail_status is not None:
            harness.fail("create_event", fail_status, 1)
        harness.kube.create_event(
            namespace="default",
            pod="web-0",
            uid="uid-1",
            reason="BindingSucceed",
            message="bound to node-a",
            type=event_type,
        )
        if not recorded:
            assert harness.cluster.events == []
            return
        [event] = harness.cluster.events
        assert event["involvedObject"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web-0",
            "namespace": "default",
            "uid": "uid-1",
        }
        assert (event["reason"], event["message"], event["type"]) == (
            "BindingSucceed",
            "bound to node-a",
            event_type,
        )
        assert event["metadata"]["name"].startswith("web-0.")

    # ----- nodes --------------------------------------------------------------------------

    def test_list_and_get_nodes(self, harness: Harness) -> None:
        harness.cluster.put("nodes", node("n2"))
        harness.cluster.put("nodes", node("n1", {"k": "v"}))
        assert [objects.name(n) for n in harness.kube.list_nodes()] == ["n1", "n2"]
        listing = harness.kube.list_nodes_with_version()
        assert listing.resource_version == harness.cluster.resource_version
        got = harness.kube.get_node("n1")
        assert got is not None and objects.annotations(got) == {"k": "v"}
        assert harness.kube.get_node("n9") is None

    @pytest.mark.parametrize(
        ("annotations", "version", "error", "final"),
        [
            pytest.param({"b": "2"}, None, None, {"a": "1", "b": "2"}, id="unconditional"),
            pytest.param({"a": None}, "current", None, {}, id="remove-at-current-version"),
            pytest.param({"b": "2"}, "stale", Conflict, {"a": "1"}, id="stale-version"),
        ],
    )
    def test_patch_node_annotations(
        self,
        harness: Harness,
        annotations: dict[str, str | None],
        version: str | None,
        error: type[Exception] | None,
        final: dict[str, str],
    ) -> None:
        first = harness.cluster.put("nodes", node("n1", {"a": "1"}))
        stored = harness.cluster.patch("nodes", "", "n1", {"metadata": {"labels": {"x": "y"}}})
        versions = {
            "current": objects.resource_version(stored),
            "stale": objects.resource_version(first),
        }
        rv = None if version is None else versions[version]
        if error is None:
            returned = harness.kube.patch_node_annotations("n1", annotations, resource_version=rv)
            assert objects.annotations(returned) == final
        else:
            with pytest.raises(error) as caught:
                harness.kube.patch_node_annotations("n1", annotations, resource_version=rv)
            assert "node n1" in str(caught.value) and "modified" in str(caught.value)
        assert objects.annotations(harness.cluster.require("nodes", "", "n1")) == final

    def test_patch_missing_node_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFound, match="n9"):
            harness.kube.patch_node_annotations("n9", {"a": "b"})

    @pytest.mark.parametrize(
        ("operation", "status", "error"),
        [
            pytest.param("get_pod", 500, KubeError, id="get-pod-500"),
            pytest.param("list_pods", 503, KubeError, id="list-pods-503"),
            pytest.param("patch_node", 403, KubeError, id="patch-node-403"),
            pytest.param("watch_pods", 410, WatchExpired, id="watch-410"),
            pytest.param("list_pdbs", 500, KubeError, id="list-pdbs-500"),
        ],
    )
    def test_server_errors_surface(
        self, harness: Harness, operation: str, status: int, error: type[KubeError]
    ) -> None:
        harness.cluster.put("pods", pod("web-0"))
        harness.cluster.put("nodes", node("n1"))
        harness.fail(operation, status, 1)
        calls: dict[str, Callable[[], object]] = {
            "get_pod": lambda: harness.kube.get_pod("default", "web-0"),
            "list_pods": lambda: harness.kube.list_pods(),
            "patch_node": lambda: harness.kube.patch_node_annotations("n1", {"a": "b"}),
            "watch_pods": lambda: take(harness.kube.watch_pods("1", timeout_s=1), 1),
            "list_pdbs": lambda: harness.kube.list_pdbs(),
        }
        with pytest.raises(error) as caught:
            calls[operation]()
        assert type(caught.value) is error
        assert caught.value.status == status
        calls[operation]()  # the failure was for one call only

    # ----- disruption budgets -------------------------------------------------------------

    def test_list_pdbs_lists_every_namespace(self, harness: Harness) -> None:
        assert harness.kube.list_pdbs() == []
        for namespace, name in (("ml", "train"), ("default", "web")):
            harness.cluster.put(
                "poddisruptionbudgets",
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"selector": {"matchLabels": {"app": name}}},
                    "status": {"disruptionsAllowed": 1},
                },
            )
        listed = harness.kube.list_pdbs()
        assert [(objects.namespace(b), objects.name(b)) for b in listed] == [
            ("default", "web"),
            ("ml", "train"),
        ]
        assert listed[1]["spec"]["selector"] == {"matchLabels": {"app": "train"}}
        assert listed[1]["status"]["disruptionsAllowed"] == 1

    # ----- watches ------------------------------------------------------------------------

    def test_watch_pods_streams_changes_in_order(self, harness: Harness) -> None:
        harness.cluster.put("pods", pod("old"))
        since = harness.kube.list_pods_with_version().resource_version
        harness.cluster.put("pods", pod("web-0"))
        harness.kube.patch_pod_annotations("default", "web-0", {"a": "1"})
        harness.cluster.put("pods", pod("web-1"))
        harness.cluster.delete("pods", "default", "web-0")
        events = take(harness.kube.watch_pods(since, timeout_s=2), 4)
        assert events == [
            ("ADDED", "web-0"),
            ("MODIFIED", "web-0"),
            ("ADDED", "web-1"),
            ("DELETED", "web-0"),
        ]

    def test_watch_without_version_starts_with_current_state(self, harness: Harness) -> None:
        harness.cluster.put("pods", pod("b"))
        harness.cluster.put("pods", pod("a"))
        assert take(harness.kube.watch_pods(None, timeout_s=2), 2) == [
            ("ADDED", "a"),
            ("ADDED", "b"),
        ]

    def test_watch_delivers_changes_made_while_watching(self, harness: Harness) -> None:
        """A change made after the first event arrives is seen: the stream is live."""
        harness.cluster.put("pods", pod("web-0"))
        seen: list[tuple[str, str]] = []
        watch = harness.kube.watch_pods(None, timeout_s=2)
        for event_type, obj in watch:
            seen.append((event_type, objects.name(obj)))
            if len(seen) == 1:
                harness.kube.patch_pod_annotations("default", "web-0", {"a": "1"})
            elif event_type == "MODIFIED":
                break
        assert seen == [("ADDED", "web-0"), ("MODIFIED", "web-0")]
        assert objects.annotations(obj) == {"a": "1"}

    def test_watch_nodes(self, harness: Harness) -> None:
        since = harness.cluster.resource_version
        harness.cluster.put("nodes", node("n1"))
        harness.kube.patch_node_annotations("n1", {"a": "1"})
        harness.cluster.put("pods", pod("not-a-node"))
        harness.cluster.delete("nodes", "", "n1")
        events = take(harness.kube.watch_nodes(since, timeout_s=2), 3)
        assert events == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")]

    def test_watch_ends_at_timeout(self, harness: Harness) -> None:
        harness.cluster.put("pods", pod("web-0"))
        since = harness.cluster.resource_version
        assert list(harness.kube.watch_pods(since, timeout_s=1)) == []

    def test_watch_expired_after_compaction(self, harness: Harness) -> None:
        since = harness.cluster.resource_version
        harness.cluster.put("pods", pod("web-0"))
        harness.cluster.compact()
        with pytest.raises(WatchExpired, match="too old resource version") as caught:
            take(harness.kube.watch_pods(since, timeout_s=1), 1)
        assert caught.value.status == 410

    @pytest.mark.parametrize(
        ("version", "timeout"),
        [
            pytest.param("1", 0, id="zero-timeout"),
            pytest.param("1", 1.5, id="fractional-timeout"),
            pytest.param(7, 1, id="int-version"),
        ],
    )
    def test_watch_rejects_bad_arguments_at_once(
        self, harness: Harness, version: Any, timeout: Any
    ) -> None:
        with pytest.raises(ValueError, match="watch"):
            harness.kube.watch_pods(version, timeout)

    # ----- leases -------------------------------------------------------------------------

    def test_leases(self, harness: Harness) -> None:
        assert harness.kube.get_lease("kube-system", "vgpu") is None
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "vgpu"},
            "spec": {
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "renewTime": "2026-08-01T06:00:00.000000Z",
            },
        }
        created = harness.kube.create_lease("kube-system", lease)
        with pytest.raises(Conflict, match="already exists"):
            harness.kube.create_lease("kube-system", lease)
        renewed = {
            **created,
            "spec": {**created["spec"], "renewTime": "2026-08-01T06:00:05.000000Z"},
        }
        replaced = harness.kube.replace_lease("kube-system", renewed)
        assert replaced["spec"]["renewTime"] == "2026-08-01T06:00:05.000000Z"
        with pytest.raises(Conflict, match="modified"):
            harness.kube.replace_lease("kube-system", {**renewed, "spec": {"holderIdentity": "b"}})
        got = harness.kube.get_lease("kube-system", "vgpu")
        assert got is not None and got["spec"]["holderIdentity"] == "a"

    # ----- node lock ----------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("existing", "owner_exists", "outcome"),
        [
            pytest.param(None, False, MINE, id="free"),
            pytest.param(MINE, False, MINE, id="held-by-same-pod"),
            pytest.param("2026-08-01T05:58:00Z,default,other", True, None, id="contention"),
            pytest.param(
                "2026-08-01T05:58:00+02:00,default,other", True, MINE, id="old-in-other-zone"
            ),
            pytest.param("2026-08-01T05:54:59Z,default,other", True, MINE, id="stale-by-age"),
            pytest.param("2026-08-01T05:58:00Z,default,other", False, MINE, id="owner-gone"),
            pytest.param("2026-08-01T05:58:00Z", True, None, id="legacy-fresh"),
            pytest.param("2026-08-01T05:50:00Z", True, MINE, id="legacy-stale"),
            pytest.param("garbage", True, MINE, id="unreadable-taken-over"),
        ],
    )
    def test_node_lock_acquire(
        self, harness: Harness, existing: str | None, owner_exists: bool, outcome: str | None
    ) -> None:
        harness.cluster.put("pods", pod("web-0"))
        if owner_exists:
            harness.cluster.put("pods", pod("other"))
        harness.cluster.put("nodes", node("n1", {LOCK_ANNOTATION: existing} if existing else {}))
        lock = make_lock(harness)
        if outcome is None:
            with pytest.raises(
                NodeLockContention, match=r"node n1 has been locked .*: node lock contention"
            ):
                lock.acquire("n1", "default", "web-0")
            assert lock_of(harness) == existing
        else:
            lock.acquire("n1", "default", "web-0")
            assert lock_of(harness) == outcome
            assert lock.holder("n1") == LockValue(NOW, "default", "web-0")

    def test_node_lock_retries_lost_races(self, harness: Harness) -> None:
        harness.cluster.put("nodes", node("n1"))
        harness.fail("patch_node", 409, 2)
        make_lock(harness).acquire("n1", "default", "web-0")
        assert lock_of(harness) == MINE

    def test_node_lock_gives_up_after_the_backoff(self, harness: Harness) -> None:
        harness.cluster.put("nodes", node("n1"))
        harness.fail("patch_node", 409, 3)
        lock = make_lock(harness, backoff=Backoff(steps=3, initial_s=0.0))
        with pytest.raises(NodeLockContention, match="3 times"):
            lock.acquire("n1", "default", "web-0")
        assert lock_of(harness) is None

    def test_node_lock_missing_node(self, harness: Harness) -> None:
        with pytest.raises(NotFound, match="n9"):
            make_lock(harness).acquire("n9", "default", "web-0")

    @pytest.mark.parametrize(
        ("existing", "who", "released", "left"),
        [
            pytest.param(MINE, "web-0", True, None, id="by-owner"),
            pytest.param(MINE, "other", False, MINE, id="by-another-pod"),
            pytest.param("2026-08-01T05:58:00Z", "other", True, None, id="legacy-has-no-owner"),
            pytest.param(None, "web-0", False, None, id="not-locked"),
        ],
    )
    def test_node_lock_release(
        self, harness: Harness, existing: str | None, who: str, released: bool, left: str | None
    ) -> None:
        harness.cluster.put("nodes", node("n1", {LOCK_ANNOTATION: existing} if existing else {}))
        assert make_lock(harness).release("n1", "default", who) is released
        assert lock_of(harness) == left

    def test_node_lock_round_trip_lets_the_next_pod_in(self, harness: Harness) -> None:
        harness.cluster.put("pods", pod("web-0"))
        harness.cluster.put("pods", pod("web-1"))
        harness.cluster.put("nodes", node("n1"))
        lock = make_lock(harness, timeout=timedelta(minutes=5))
        lock.acquire("n1", "default", "web-0")
        with pytest.raises(NodeLockContention):
            lock.acquire("n1", "default", "web-1")
        assert lock.release("n1", "default", "web-0")
        lock.acquire("n1", "default", "web-1")
        assert lock_of(harness) == f"{NOW:%Y-%m-%dT%H:%M:%SZ},default,web-1"

    def test_node_lock_race_between_replicas_has_one_winner(self, harness: Harness) -> None:
        """Replicas (one NodeLock each) racing for one node: exactly one gets it."""
        replicas = 6
        harness.cluster.put("nodes", node("n1"))
        for i in range(replicas):
            harness.cluster.put("pods", pod(f"web-{i}"))
        start = threading.Barrier(replicas)
        outcomes: dict[str, str] = {}

        def bind(i: int) -> None:
            lock = make_lock(harness)
            start.wait()
            try:
                lock.acquire("n1", "default", f"web-{i}")
                outcomes[f"web-{i}"] = "locked"
            except NodeLockContention:
                outcomes[f"web-{i}"] = "contention"

        threads = [threading.Thread(target=bind, args=(i,)) for i in range(replicas)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [name for name, outcome in outcomes.items() if outcome == "locked"]
        assert len(outcomes) == replicas and len(winners) == 1
        assert lock_of(harness) == f"{NOW:%Y-%m-%dT%H:%M:%SZ},default,{winners[0]}"
