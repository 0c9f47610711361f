"""An in-memory object store with the API server's write and watch semantics.

It backs both :class:`~vgpu_extender.kube.fake.FakeKubeClient` and the test API
server, so the fake and the real client over HTTP see one behaviour:

- one cluster-wide resourceVersion counter, like etcd's revision;
- merge patches whose ``metadata.resourceVersion`` or ``metadata.uid`` is stale fail
  with 409, as do replaces with a stale version and creates of an existing name;
- a binding sets the pod's node and the Binding's annotations in one update, and
  fails with 409 when the pod already has a node or another UID;
- a bounded change history (:mod:`~vgpu_extender.kube.history`), so a watch can
  resume from a version and a version older than the history fails with 410.

Errors carry the API server's own ``reason`` and ``message`` wording.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from vgpu_extender.kube.client import Listing, WatchEvent, is_unversioned
from vgpu_extender.kube.errors import (
    AlreadyBound,
    Conflict,
    KubeError,
    NotFound,
    UidMismatch,
)
from vgpu_extender.kube.history import Change, ChangeLog
from vgpu_extender.kube.objects import KubeObject

Kind = Literal["pods", "nodes", "leases", "poddisruptionbudgets"]
Predicate = Callable[[Mapping[str, Any]], bool]

_NAMESPACED: dict[str, bool] = {
    "pods": True,
    "nodes": False,
    "leases": True,
    "poddisruptionbudgets": True,
}
_QUALIFIED: dict[str, str] = {
    "pods": "pods",
    "nodes": "nodes",
    "leases": "leases.coordination.k8s.io",
    "poddisruptionbudgets": "poddisruptionbudgets.policy",
}
_TYPE_META: dict[str, tuple[str, str]] = {
    "pods": ("v1", "Pod"),
    "nodes": ("v1", "Node"),
    "leases": ("coordination.k8s.io/v1", "Lease"),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget"),
}
_MODIFIED_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _invalid(message: str) -> KubeError:
    return KubeError(message, status=422, reason="Invalid")


class InMemoryCluster:
    """Pods, nodes, leases and PodDisruptionBudgets in memory, with watches. Thread-safe."""

    def __init__(self, *, history_limit: int = 10_000) -> None:
        self._cond = threading.Condition()
        self._objects: dict[str, dict[tuple[str, str], KubeObject]] = {k: {} for k in _NAMESPACED}
        self._revision = 1  # etcd starts at 1 too; "0" means "any version" to a watch
        self._history = ChangeLog(history_limit, start=self._revision)
        self._closed = False
        self.events: list[KubeObject] = []
        self.bindings: list[KubeObject] = []

    # ----- reading -------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._cond:
            return str(self._revision)

    def get(self, kind: Kind, namespace: str, name: str) -> KubeObject | None:
        with self._cond:
            obj = self._objects[kind].get(self._key(kind, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def require(self, kind: Kind, namespace: str, name: str) -> KubeObject:
        obj = self.get(kind, namespace, name)
        if obj is None:
            raise self._not_found(kind, name)
        return obj

    def list_objects(
        self, kind: Kind, *, namespace: str | None = None, predicate: Predicate | None = None
    ) -> Listing:
        """Matching objects sorted by namespace and name (etcd key order)."""
        with self._cond:
            items = [
                copy.deepcopy(obj)
                for key, obj in sorted(self._objects[kind].items())
                if (namespace is None or key[0] == namespace)
                and (predicate is None or predicate(obj))
            ]
            return Listing(items, str(self._revision))

    def require_history(self, resource_version: str) -> None:
        """``WatchExpired`` (410) when changes since ``resource_version`` were compacted
        away: a list continued from a snapshot that old cannot be consistent."""
        version = self._parse_version(resource_version)
        with self._cond:
            self._history.require(version)

    # ----- writing -------------------------------------------------------------------

    def put(self, kind: Kind, obj: Mapping[str, Any]) -> KubeObject:
        """Create or overwrite unconditionally (test set-up), filling in server fields."""
        with self._cond:
            new = self._normalise(kind, obj)
            key = self._key(kind, new["metadata"].get("namespace", ""), new["metadata"]["name"])
            old = self._objects[kind].get(key)
            if old is not None:
                new["metadata"].setdefault("uid", old["metadata"]["uid"])
            return self._store(kind, key, old, new)

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> KubeObject:
        with self._cond:
            new = self._normalise(kind, obj)
            key = self._key(kind, new["metadata"].get("namespace", ""), new["metadata"]["name"])
            if key in self._objects[kind]:
                raise Conflict(
                    f'{_QUALIFIED[kind]} "{key[1]}" already exists',
                    status=409,
                    reason="AlreadyExists",
                )
            return self._store(kind, key, None, new)

    def replace(self, kind: Kind, obj: Mapping[str, Any]) -> KubeObject:
        """PUT: the stored version must match ``metadata.resourceVersion`` when it is given."""
        with self._cond:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            key = self._key(kind, str(meta.get("namespace") or ""), name)
            old = self._objects[kind].get(key)
            if old is None:
                raise self._not_found(kind, name)
            self._check_preconditions(kind, name, old, meta)
            new = self._normalise(kind, obj)
            new["metadata"]["uid"] = old["metadata"]["uid"]
            new["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            return self._store(kind, key, old, new)

    def patch(self, kind: Kind, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject:
        """Merge patch; its ``metadata.resourceVersion`` and ``metadata.uid`` are preconditions."""
        with self._cond:
            key = self._key(kind, namespace, name)
            old = self._objects[kind].get(key)
            if old is None:
                raise self._not_found(kind, name)
            meta = patch.get("metadata")
            if meta is not None and not isinstance(meta, Mapping):
                raise _invalid(f"metadata: Invalid value: {meta!r}: must be an object")
            self._check_preconditions(kind, name, old, meta or {})
            new = merge_patch(old, patch)
            if not isinstance(new.get("metadata"), Mapping):
                raise _invalid("metadata: Required value")
            # Identity fields are immutable; the server ignores attempts to change them.
            new["metadata"] = dict(new["metadata"])
            for field in ("name", "namespace", "uid", "creationTimestamp"):
                if field in old["metadata"]:
                    new["metadata"][field] = old["metadata"][field]
            return self._store(kind, key, old, new)

    def delete(self, kind: Kind, namespace: str, name: str) -> KubeObject:
        with self._cond:
            key = self._key(kind, namespace, name)
            old = self._objects[kind].pop(key, None)
            if old is None:
                raise self._not_found(kind, name)
            self._revision += 1
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._revision)
            self._record(Change(self._revision, kind, old, gone, deleted=True))
            return copy.deepcopy(gone)

    def bind(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: Mapping[str, str] | None = None,
    ) -> KubeObject:
        """What ``POST pods/{name}/binding`` does: set spec.nodeName once, guarded by UID.

        The Binding's annotations are set on the pod in that same update (each key added
        or overwritten, none removed), as the API server's ``setPodHostAndAnnotations``
        does: one new version, one watch event.
        """
        if not node:
            raise _invalid("target.name: Required value")
        with self._cond:
            key = self._key("pods", namespace, name)
            old = self._objects["pods"].get(key)
            if old is None:
                raise self._not_found("pods", name)
            prefix = f'Operation cannot be fulfilled on pods/binding "{name}": '
            stored_uid = old["metadata"]["uid"]
            if uid and uid != stored_uid:
                raise UidMismatch(
                    f"{prefix}Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {stored_uid}",
                    status=409,
                    reason="Conflict",
                )
            current = (old.get("spec") or {}).get("nodeName")
            if current:
                raise AlreadyBound(
                    f'{prefix}pod {name} is already assigned to node "{current}"',
                    node=current,
                )
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["nodeName"] = node
            if annotations:
                pod_annotations = new["metadata"].get("annotations") or {}
                new["metadata"]["annotations"] = {**pod_annotations, **annotations}
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()}
            )
            metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
            if annotations:
                metadata["annotations"] = dict(annotations)
            self.bindings.append(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": metadata,
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                }
            )
            return self._store("pods", key, old, new)

    def record_event(self, event: Mapping[str, Any]) -> KubeObject:
        """Keep an Event (core/v1 or events.k8s.io/v1) as created; fills in its name."""
        with self._cond:
            stored = copy.deepcopy(dict(event))
            meta = stored.setdefault("metadata", {})
            if not meta.get("name"):
                meta["name"] = f"{meta.get('generateName') or 'event.'}{uuid.uuid4().hex[:10]}"
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            self._revision += 1
            meta["resourceVersion"] = str(self._revision)
            self.events.append(stored)
            return copy.deepcopy(stored)

    # ----- watching ------------------------------------------------------------------

    def watch(
        self,
        kind: Kind,
        resource_version: str | None,
        timeout_s: float,
        *,
        namespace: str | None = None,
        predicate: Predicate | None = None,
    ) -> Iterator[WatchEvent]:
        """Changes after ``resource_version`` until ``timeout_s`` has passed.

        The timeout bounds the whole watch, as the server's ``timeoutSeconds`` does. A
        malformed version fails here; an expired one at the first ``next()``, as an
        etcd watch reports it in the stream.
        """
        deadline = time.monotonic() + timeout_s

        def matches(obj: KubeObject | None) -> bool:
            if obj is None:
                return False
            ns_ok = namespace is None or obj["metadata"].get("namespace") == namespace
            return ns_ok and (predicate is None or predicate(obj))

        with self._cond:
            if is_unversioned(resource_version):
                cursor = self._revision
                initial = self.list_objects(kind, namespace=namespace, predicate=predicate).items
            else:
                cursor = self._parse_version(resource_version)
                initial = []
        return self._follow(kind, cursor, initial, deadline, matches)

    def _follow(
        self,
        kind: Kind,
        cursor: int,
        initial: list[KubeObject],
        deadline: float,
        matches: Callable[[KubeObject | None], bool],
    ) -> Iterator[WatchEvent]:
        for obj in initial:
            yield "ADDED", obj
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    pending = self._history.after(cursor)
                    if pending:
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._cond.wait(remaining)
            for change in pending:
                cursor = change.revision
                event = change.as_event(matches) if change.kind == kind else None
                if event is not None:
                    yield event

    def compact(self) -> None:
        """Forget the history, as etcd compaction does: older versions now get 410."""
        with self._cond:
            self._history.compact(self._revision)
            self._cond.notify_all()

    def close(self) -> None:
        """End every open watch."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ----- internals -----------------------------------------------------------------

    @staticmethod
    def _key(kind: str, namespace: str, name: str) -> tuple[str, str]:
        return (namespace if _NAMESPACED[kind] else "", name)

    @staticmethod
    def _not_found(kind: str, name: str) -> NotFound:
        return NotFound(f'{_QUALIFIED[kind]} "{name}" not found', status=404, reason="NotFound")

    def _check_preconditions(
        self, kind: str, name: str, old: KubeObject, meta: Mapping[str, Any]
    ) -> None:
        prefix = f'Operation cannot be fulfilled on {_QUALIFIED[kind]} "{name}": '
        wanted_uid = meta.get("uid")
        if wanted_uid and wanted_uid != old["metadata"]["uid"]:
            raise UidMismatch(
                f"{prefix}Precondition failed: UID in precondition: {wanted_uid}, "
                f"UID in object meta: {old['metadata']['uid']}",
                status=409,
                reason="Conflict",
            )
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old["metadata"]["resourceVersion"]:
            raise Conflict(prefix + _MODIFIED_MESSAGE, status=409, reason="Conflict")

    def _normalise(self, kind: str, obj: Mapping[str, Any]) -> KubeObject:
        new = copy.deepcopy(dict(obj))
        api_version, type_name = _TYPE_META[kind]
        new.setdefault("apiVersion", api_version)
        new.setdefault("kind", type_name)
        meta = new.get("metadata")
        if not isinstance(meta, Mapping):
            raise _invalid(f"metadata: Invalid value: {meta!r}: must be an object")
        meta = new["metadata"] = dict(meta)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _invalid("metadata.name: Required value: name or generateName is required")
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if _NAMESPACED[kind]:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        return new

    def _store(
        self, kind: str, key: tuple[str, str], old: KubeObject | None, new: KubeObject
    ) -> KubeObject:
        """Caller holds the lock. Stamps a new version, records the change, wakes watchers."""
        self._revision += 1
        new["metadata"]["resourceVersion"] = str(self._revision)
        self._objects[kind][key] = new
        self._record(Change(self._revision, kind, old, copy.deepcopy(new)))
        return copy.deepcopy(new)

    def _record(self, change: Change) -> None:
        self._history.append(change)
        self._cond.notify_all()

    @staticmethod
    def _parse_version(resource_version: str | None) -> int:
        try:
            value = int(str(resource_version))
        except ValueError:
            value = -1
        if value < 0:
            raise KubeError(
                f"resourceVersion: Invalid value: {resource_version!r}: must be a number",
                status=400,
                reason="BadRequest",
            )
        return value
