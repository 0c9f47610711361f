"""An in-memory :class:`~vgpu_extender.kube.client.KubeClient` for unit tests.

It keeps objects in an :class:`InMemoryCluster`, the same store the test API server
uses, and raises the same errors with the same messages as the real client, so a
unit test of a service sees what production would see. ``fail_next`` injects
failures into any operation; ``lose_answer_next`` lets a Binding through and then
raises, as a lost answer does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from vgpu_extender.kube import bodies
from vgpu_extender.kube.client import EventType, Listing, Pace, WatchEvent, check_watch_args
from vgpu_extender.kube.errors import KubeError, OutcomeUnknown, as_binding_error, with_context
from vgpu_extender.kube.memory import InMemoryCluster, Kind
from vgpu_extender.kube.objects import KubeObject

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _on_node(node: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda pod: (pod.get("spec") or {}).get("nodeName") == node


class FakeKubeClient:
    """Implements ``KubeClient`` in memory; set-up helpers add and change objects."""

    def __init__(
        self,
        cluster: InMemoryCluster | None = None,
        *,
        component: str = "vgpu-extender",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.cluster = cluster if cluster is not None else InMemoryCluster()
        self._component = component
        self._clock = clock
        self._faults: list[tuple[str, KubeError, int]] = []
        self._losses: list[KubeError] = []
        self._faults_lock = threading.Lock()
        self.calls: list[str] = []

    # ----- set-up and inspection helpers ---------------------------------------------

    def add_pod(self, pod: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("pods", pod)

    def add_node(self, node: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("nodes", node)

    def delete_pod(self, namespace: str, name: str) -> KubeObject:
        return self.cluster.delete("pods", namespace, name)

    def add_pdb(self, pdb: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("poddisruptionbudgets", pdb)

    def delete_node(self, name: str) -> KubeObject:
        return self.cluster.delete("nodes", "", name)

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> KubeObject:
        return self.cluster.patch("pods", namespace, name, {"status": {"phase": phase}})

    @property
    def events(self) -> list[KubeObject]:
        return self.cluster.events

    @property
    def bindings(self) -> list[KubeObject]:
        return self.cluster.bindings

    def fail_next(self, operation: str, error: KubeError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (a method name) raise ``error``."""
        if not hasattr(self, operation) or operation.startswith("_"):
            raise ValueError(f"operation must be a KubeClient method name, got {operation!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        with self._faults_lock:
            self._faults.append((operation, error, times))

    def lose_answer_next(self, error: KubeError | None = None) -> None:
        """Apply the next ``bind_pod`` and then raise ``error`` (by default the
        ``OutcomeUnknown`` of a connection closed before the answer)."""
        lost = error or OutcomeUnknown("no answer to a request sent: connection closed")
        with self._faults_lock:
            self._losses.append(lost)

    # ----- KubeClient ----------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> KubeObject | None:
        self._enter("get_pod")
        return self.cluster.get("pods", namespace, name)

    def list_pods(self, *, node: str | None = None) -> list[KubeObject]:
        return self.list_pods_with_version(node=node).items

    def list_pods_with_version(
        self, *, node: str | None = None, pace: Pace | None = None
    ) -> Listing:
        self._enter("list_pods")
        on_node = None if node is None else _on_node(node)
        return _paced(self.cluster.list_objects("pods", predicate=on_node), pace)

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
    ) -> KubeObject:
        body = bodies.metadata_patch(annotations=annotations, labels=labels)
        self._enter("patch_pod_annotations")
        return self._call(
            f"patch pod {namespace}/{name}",
            lambda: self.cluster.patch("pods", namespace, name, body),
        )

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        body = bodies.binding(namespace, name, uid, node, annotations)
        self._enter("bind_pod")
        try:
            self.cluster.bind(namespace, name, uid, node, body["metadata"].get("annotations"))
        except KubeError as exc:
            error = with_context(exc, f"bind pod {namespace}/{name} to node {node}")
            raise as_binding_error(error) from None
        with self._faults_lock:
            lost = self._losses.pop(0) if self._losses else None
        if lost is not None:
            raise with_context(lost, f"bind pod {namespace}/{name} to node {node}")

    def create_event(
        self,
        *,
        namespace: str,
        pod: str,
        uid: str = "",
        reason: str,
        message: str,
        type: EventType = "Normal",
    ) -> None:
        try:
            body = bodies.pod_event(
                namespace=namespace,
                pod=pod,
                uid=uid,
                reason=reason,
                message=message,
                type=type,
                component=self._component,
                now=self._clock(),
            )
            self._enter("create_event")
            self.cluster.record_event(body)
        except (KubeError, ValueError) as exc:
            logger.warning("event %s for pod %s/%s not recorded: %s", reason, namespace, pod, exc)

    def list_nodes(self) -> list[KubeObject]:
        return self.list_nodes_with_version().items

    def list_nodes_with_version(self, *, pace: Pace | None = None) -> Listing:
        self._enter("list_nodes")
        return _paced(self.cluster.list_objects("nodes"), pace)

    def get_node(self, name: str) -> KubeObject | None:
        self._enter("get_node")
        return self.cluster.get("nodes", "", name)

    def patch_node_annotations(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        body = bodies.metadata_patch(annotations=annotations, resource_version=resource_version)
        self._enter("patch_node_annotations")
        return self._call(f"patch node {name}", lambda: self.cluster.patch("nodes", "", name, body))

    def watch_pods(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        check_watch_args(resource_version, timeout_s)
        return self._watch("pods", resource_version, timeout_s)

    def watch_nodes(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        check_watch_args(resource_version, timeout_s)
        return self._watch("nodes", resource_version, timeout_s)

    def list_pdbs(self) -> list[KubeObject]:
        self._enter("list_pdbs")
        return self.cluster.list_objects("poddisruptionbudgets").items

    def get_lease(self, namespace: str, name: str) -> KubeObject | None:
        self._enter("get_lease")
        return self.cluster.get("leases", namespace, name)

    def create_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        body = _in_namespace(namespace, lease)
        self._enter("create_lease")
        return self._call(f"create lease {namespace}", lambda: self.cluster.create("leases", body))

    def replace_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        body = _in_namespace(namespace, lease)
        self._enter("replace_lease")
        return self._call(
            f"replace lease {namespace}/{body['metadata'].get('name')}",
            lambda: self.cluster.replace("leases", body),
        )

    # ----- internals -----------------------------------------------------------------

    def _enter(self, operation: str) -> None:
        """Log the call and raise an injected fault, if one is pending for it."""
        self.calls.append(operation)
        with self._faults_lock:
            for i, (name, error, times) in enumerate(self._faults):
                if name == operation:
                    if times == 1:
                        del self._faults[i]
                    else:
                        self._faults[i] = (name, error, times - 1)
                    raise error

    @staticmethod
    def _call(context: str, action: Callable[[], T]) -> T:
        try:
            return action()
        except KubeError as exc:
            raise with_context(exc, context) from None

    def _watch(
        self, kind: Kind, resource_version: str | None, timeout_s: int
    ) -> Iterator[WatchEvent]:
        self._enter(f"watch_{kind}")  # at the first next(), when the real client connects
        try:
            yield from self.cluster.watch(kind, resource_version, timeout_s)
        except KubeError as exc:
            raise with_context(exc, f"watch {kind} from {resource_version!r}") from None


def _in_namespace(namespace: str, obj: Mapping[str, object]) -> dict[str, Any]:
    body = dict(obj)
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError(f"lease metadata must be an object, got {meta!r}")
    body["metadata"] = {**meta, "namespace": namespace}
    return body


def _paced(listing: Listing, pace: Pace | None) -> Listing:
    """``pace`` called once per object, as the real client calls it while decoding."""
    if pace is not None:
        for _item in listing.items:
            pace()
    return listing
