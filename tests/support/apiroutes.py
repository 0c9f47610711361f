"""The REST routes of the test API server, on top of an :class:`InMemoryCluster`.

Each route takes a parsed :class:`Request` and returns a :class:`Reply` (one JSON
body) or a :class:`Stream` (a watch: newline-delimited events). Failures are
:class:`KubeError` with the real server's status code, reason and message, which the
server turns into a ``Status`` body.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tests.support.selectors import Predicate, SelectorError, field_selector, label_selector
from vgpu_extender.kube.errors import KubeError, WatchExpired
from vgpu_extender.kube.memory import InMemoryCluster, Kind

MERGE_TYPES = frozenset({"application/merge-patch+json", "application/strategic-merge-patch+json"})
LIST_KINDS: dict[str, tuple[str, str]] = {
    "pods": ("v1", "PodList"),
    "nodes": ("v1", "NodeList"),
    "leases": ("coordination.k8s.io/v1", "LeaseList"),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudgetList"),
}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    content_type: str
    body: bytes
    params: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        try:
            value = msgspec.json.decode(self.body or b"null")
        except msgspec.DecodeError as exc:
            raise bad_request(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise bad_request(f"the request body must be a JSON object, got {value!r}")
        return value


@dataclass(frozen=True)
class Reply:
    status: int
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Stream:
    """A watch: each item is one ``{"type": ..., "object": ...}`` line."""

    events: Iterator[dict[str, Any]]


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if 200 <= code <= 299 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def bad_request(message: str) -> KubeError:
    return KubeError(message, status=400, reason="BadRequest")


Handler = Callable[[InMemoryCluster, Request, int], "Reply | Stream"]


def _collection(kind: Kind) -> Handler:
    """GET on a collection: a list, or a watch with ``?watch=true``."""

    def handle(
        cluster: InMemoryCluster, request: Request, default_timeout_s: int
    ) -> Reply | Stream:
        namespace = request.params.get("namespace")
        try:
            predicates = [
                p
                for p in (
                    field_selector(kind, request.query.get("fieldSelector")),
                    label_selector(request.query.get("labelSelector")),
                )
                if p is not None
            ]
        except SelectorError as exc:
            raise bad_request(str(exc)) from None

        def predicate(obj: Mapping[str, Any]) -> bool:
            return all(p(obj) for p in predicates)

        chosen: Predicate | None = predicate if predicates else None
        if request.query.get("watch") in ("true", "1"):
            timeout = _timeout(request.query.get("timeoutSeconds"), default_timeout_s)
            events = cluster.watch(
                kind,
                request.query.get("resourceVersion"),
                timeout,
                namespace=namespace,
                predicate=chosen,
            )
            return Stream(_watch_lines(events))
        token = request.query.get("continue")
        start = _continued(token) if token else None
        if start is not None:
            _require_snapshot(cluster, start.rv)
        listing = cluster.list_objects(kind, namespace=namespace, predicate=chosen)
        items, metadata = _page(
            listing.items, listing.resource_version, request.query.get("limit"), start
        )
        api_version, list_kind = LIST_KINDS[kind]
        return Reply(
            200,
            {"apiVersion": api_version, "kind": list_kind, "metadata": metadata, "items": items},
        )

    return handle


class _Continue(msgspec.Struct, frozen=True):
    """A ``continue`` token: the first page's resourceVersion and the last key sent."""

    rv: str
    after: tuple[str, str]


def _continued(token: str) -> _Continue:
    try:
        return msgspec.json.decode(base64.urlsafe_b64decode(token), type=_Continue)
    except (ValueError, msgspec.DecodeError):
        raise bad_request(f"continue token {token!r} is not one this server gave") from None


def _require_snapshot(cluster: InMemoryCluster, version: str) -> None:
    """The real server's answer to a token whose snapshot was compacted away: 410."""
    try:
        cluster.require_history(version)
    except WatchExpired:
        raise WatchExpired(
            "The provided continue parameter is too old to display a consistent list "
            "result. You can start a new list without the continue parameter.",
            status=410,
            reason="Expired",
        ) from None


def _page(
    items: list[dict[str, Any]], version: str, limit: str | None, start: _Continue | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One page of a list (``limit``, ``continue``), as the real server pages: in key
    order, each page after the last key of the one before, every page carrying the
    first page's resourceVersion. Unlike the real server, a later page shows the
    objects as they are now, not as they were at that version."""
    if start is not None:
        version = start.rv
        items = [o for o in items if _key(o) > start.after]
    metadata: dict[str, Any] = {"resourceVersion": version}
    if limit is None or limit == "0":
        return items, metadata
    if not limit.isdigit():
        raise bad_request(f"limit must be a non-negative integer, got {limit!r}")
    size = int(limit)
    if len(items) > size:
        items = items[:size]
        last = _Continue(rv=version, after=_key(items[-1]))
        metadata["continue"] = base64.urlsafe_b64encode(msgspec.json.encode(last)).decode()
    return items, metadata


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _timeout(raw: str | None, default: int) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"timeoutSeconds: Invalid value: {raw!r}: must be a number") from None
    return max(value, 0)


def _watch_lines(events: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Watch events as lines; an expiry becomes an ``ERROR`` event, as the watch cache sends."""
    try:
        for event_type, obj in events:
            yield {"type": event_type, "object": obj}
    except KubeError as exc:
        yield {
            "type": "ERROR",
            "object": status_body(exc.status or 500, exc.reason or "InternalError", exc.message),
        }


def _item(kind: Kind) -> Handler:
    """GET, PATCH, PUT and DELETE on one object."""

    def handle(cluster: InMemoryCluster, request: Request, _timeout_s: int) -> Reply:
        namespace = request.params.get("namespace", "")
        name = request.params["name"]
        if request.method == "GET":
            return Reply(200, cluster.require(kind, namespace, name))
        if request.method == "DELETE":
            return Reply(200, cluster.delete(kind, namespace, name))
        if request.method == "PUT":
            body = request.json()
            meta = body.get("metadata") or {}
            if meta.get("name") != name:
                raise bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name "
                    f"on the URL ({name})"
                )
            body["metadata"] = {**meta, "namespace": namespace} if namespace else meta
            return Reply(200, cluster.replace(kind, body))
        if request.content_type not in MERGE_TYPES:
            raise KubeError(
                f"the body of the request was in an unsupported format: {request.content_type}",
                status=415,
                reason="UnsupportedMediaType",
            )
        return Reply(200, cluster.patch(kind, namespace, name, request.json()))

    return handle


def _create(kind: Kind) -> Handler:
    def handle(cluster: InMemoryCluster, request: Request, _timeout_s: int) -> Reply:
        return Reply(201, cluster.create(kind, _in_namespace(request.json(), request)))

    return handle


def _binding(cluster: InMemoryCluster, request: Request, _timeout_s: int) -> Reply:
    """``pods/{name}/binding`` and ``bindings``: 201 with a ``Status``, like the real server.

    The Binding's annotations are set on the pod together with its node.
    """
    body = request.json()
    meta = body.get("metadata") or {}
    name = request.params.get("name") or meta.get("name") or ""
    if meta.get("name") and meta["name"] != name:
        raise bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    target = body.get("target") or {}
    uid, node = str(meta.get("uid") or ""), str(target.get("name") or "")
    cluster.bind(request.params["namespace"], name, uid, node, _annotations(meta))
    return Reply(201, status_body(201, "", ""))


def _annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    """A Binding's ``metadata.annotations``; other than strings, a 400 as on the server."""
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping) or not all(
        isinstance(v, str) for v in annotations.values()
    ):
        raise bad_request(f"metadata.annotations: must be a map of strings, got {annotations!r}")
    return dict(annotations)


def _event(cluster: InMemoryCluster, request: Request, _timeout_s: int) -> Reply:
    return Reply(201, cluster.record_event(_in_namespace(request.json(), request)))


def _in_namespace(body: dict[str, Any], request: Request) -> dict[str, Any]:
    """The namespace comes from the URL, as on the real server."""
    meta = body.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise bad_request(f"metadata must be an object, got {meta!r}")
    return {**body, "metadata": {**meta, "namespace": request.params["namespace"]}}


_NS = r"(?P<namespace>[^/]+)"
_NAME = r"(?P<name>[^/]+)"
_LEASES = rf"/apis/coordination\.k8s\.io/v1/namespaces/{_NS}/leases"
_PDBS = r"/apis/policy/v1/poddisruptionbudgets"
ROUTES: list[tuple[frozenset[str], re.Pattern[str], Handler]] = [
    (frozenset({"GET"}), re.compile(r"/api/v1/pods"), _collection("pods")),
    (frozenset({"GET"}), re.compile(rf"/api/v1/namespaces/{_NS}/pods"), _collection("pods")),
    (
        frozenset({"GET", "PATCH", "DELETE"}),
        re.compile(rf"/api/v1/namespaces/{_NS}/pods/{_NAME}"),
        _item("pods"),
    ),
    (frozenset({"POST"}), re.compile(rf"/api/v1/namespaces/{_NS}/pods/{_NAME}/binding"), _binding),
    (frozenset({"POST"}), re.compile(rf"/api/v1/namespaces/{_NS}/bindings"), _binding),
    (frozenset({"GET"}), re.compile(r"/api/v1/nodes"), _collection("nodes")),
    (frozenset({"GET", "PATCH"}), re.compile(rf"/api/v1/nodes/{_NAME}"), _item("nodes")),
    (frozenset({"POST"}), re.compile(rf"/api/v1/namespaces/{_NS}/events"), _event),
    (frozenset({"POST"}), re.compile(rf"/apis/events\.k8s\.io/v1/namespaces/{_NS}/events"), _event),
    (frozenset({"GET"}), re.compile(_PDBS), _collection("poddisruptionbudgets")),
    (
        frozenset({"GET"}),
        re.compile(rf"/apis/policy/v1/namespaces/{_NS}/poddisruptionbudgets"),
        _collection("poddisruptionbudgets"),
    ),
    (frozenset({"GET"}), re.compile(_LEASES), _collection("leases")),
    (frozenset({"POST"}), re.compile(_LEASES), _create("leases")),
    (frozenset({"GET", "PUT", "PATCH"}), re.compile(rf"{_LEASES}/{_NAME}"), _item("leases")),
]


def route(cluster: InMemoryCluster, request: Request, default_timeout_s: int) -> Reply | Stream:
    """Dispatch to the route matching the whole path, or answer 404/405 like the server."""
    allowed: set[str] = set()
    for methods, pattern, handler in ROUTES:
        match = pattern.fullmatch(request.path)
        if match is None:
            continue
        if request.method not in methods:
            allowed |= methods
            continue
        params = {k: v for k, v in match.groupdict().items() if v is not None}
        bound = Request(
            request.method, request.path, request.query, request.content_type, request.body, params
        )
        return handler(cluster, bound, default_timeout_s)
    if allowed:
        raise KubeError(
            f"the server does not allow this method on the requested resource "
            f"({request.method} {request.path})",
            status=405,
            reason="MethodNotAllowed",
        )
    raise KubeError(
        f"the server could not find the requested resource ({request.path})",
        status=404,
        reason="NotFound",
    )
