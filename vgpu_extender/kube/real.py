"""``KubeClient`` on the official ``kubernetes`` Python client.

Every call passes ``_preload_content=False`` and decodes the raw body with msgspec,
so objects come back as plain dicts without model parsing. That is also the fix for
the client's Binding pitfall: ``create_namespaced_pod_binding`` raises *after* a
successful call when it tries to read the server's ``Status`` answer as a
``V1Binding`` (kubernetes-client/python#547, #825); with the raw response nothing is
parsed and success is the 2xx status.

Writes (the pod patch, the Binding, Events, node patches, Leases) skip the typed
methods: the body is a plain dict, encoded once with msgspec and sent as bytes with
the client's own URL and authentication. That leaves out per call the typed methods'
argument validation, the model round trip and the re-serialisation, which cost as
much as the request on the bind path. For Leases it is also a fix: the typed
``V1Lease`` writes ``acquireTime``/``renewTime`` with ``isoformat()``, which leaves
out zero fractional seconds that the API server's MicroTime parser requires.

POSTs and PATCHes go out on :class:`~vgpu_extender.kube.connections.ApiConnections`,
one keep-alive connection per thread at about half the CPU of the client's urllib3
pool manager. Other requests, and all of them where the configuration asks for what
those connections do not do as the pool manager would (a proxy, ``tls_server_name``,
...), stay on the pool manager.

No client-side rate limiting: the official client has none, and the extender's
call rate is bounded by kube-scheduler's own.
"""

from __future__ import annotations

import http.client
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from vgpu_extender.kube import bodies
from vgpu_extender.kube.client import (
    EventType,
    Listing,
    Pace,
    WatchEvent,
    check_watch_args,
    is_unversioned,
)
from vgpu_extender.kube.config import Timeouts
from vgpu_extender.kube.connections import ApiConnections, ConnectFailed
from vgpu_extender.kube.errors import (
    KubeError,
    NotFound,
    OutcomeUnknown,
    WatchExpired,
    as_binding_error,
    error_from_status,
)
from vgpu_extender.kube.list_page import decode_page
from vgpu_extender.kube.objects import KubeObject

logger = logging.getLogger(__name__)

JSON = "application/json"
#: Objects per page of a list. Each page is read and decoded apart: a list of 66,000
#: pods in one answer held the interpreter for half a second while msgspec decoded its
#: 40 MB, the verbs waiting; a page of 100 takes about a millisecond, and the wait for
#: the next frees it (client-go's informers ask for 500).
LIST_PAGE = 100
#: Pages one list may take (10 million objects): past it the server is paging for ever.
MOST_LIST_PAGES = 100_000
MERGE_PATCH = "application/merge-patch+json"
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
# Failures that happen before a request goes out: nothing reached the server. Any other
# transport failure (a reset, a close, a read timeout) may follow a request the server
# read and applied.
_UNSENT = (
    ConnectFailed,
    urllib3.exceptions.ConnectTimeoutError,  # NewConnectionError is one
    ConnectionRefusedError,
    socket.gaierror,
)


def _decode(data: bytes, context: str) -> KubeObject:
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise KubeError(f"{context}: the API server sent invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise KubeError(f"{context}: the API server sent {type(value).__name__}, not an object")
    return value


def _status_of(body: bytes | str | None) -> dict[str, Any] | None:
    """The ``Status`` object of an error answer; a body that is not one is quoted."""
    if not body:
        return None
    try:
        status = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return {"message": str(body)[:300]}
    return status if isinstance(status, dict) else None


def _api_error(exc: ApiException, context: str) -> KubeError:
    return error_from_status(_status_of(exc.body), http_status=exc.status, context=context)


def transport_error(exc: BaseException, context: str) -> KubeError:
    """A failure with no answer: definite when the request never went out, else unknown."""
    cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    if isinstance(cause, _UNSENT):
        return KubeError(f"{context}: {exc}")
    return OutcomeUnknown(f"{context}: no answer to a request sent: {exc}")


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-delimited records of a chunked response, as each chunk arrives."""
    buffer = bytearray()
    for chunk in response.stream(amt=None, decode_content=True):
        buffer.extend(chunk)
        start = 0
        while (end := buffer.find(b"\n", start)) != -1:
            if end > start:
                yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
    if buffer.strip():
        yield bytes(buffer)


class RealKubeClient:
    """Implements ``KubeClient`` over HTTP; build it with :meth:`from_configuration`."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        timeouts: Timeouts | None = None,
        component: str = "vgpu-extender",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api_client
        self._core = k8s.CoreV1Api(api_client)
        self._timeouts = timeouts or Timeouts()
        self._timeout = urllib3.Timeout(
            connect=self._timeouts.connect_s, read=self._timeouts.read_s
        )
        self._connections = ApiConnections.for_client(api_client, self._timeouts)
        self._component = component
        self._clock = clock

    @classmethod
    def from_configuration(cls, configuration: k8s.Configuration, **kwargs: Any) -> RealKubeClient:
        return cls(k8s.ApiClient(configuration), **kwargs)

    def close(self) -> None:
        """Close the connection pool and the keep-alive connections."""
        if self._connections is not None:
            self._connections.close()
        self._api.close()  # type: ignore[no-untyped-call]

    # ----- pods ----------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> KubeObject | None:
        try:
            return self._call(
                f"get pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace
            )
        except NotFound:
            return None

    def list_pods(self, *, node: str | None = None) -> list[KubeObject]:
        return self.list_pods_with_version(node=node).items

    def list_pods_with_version(
        self, *, node: str | None = None, pace: Pace | None = None
    ) -> Listing:
        selector = {} if node is None else {"field_selector": f"spec.nodeName={node}"}
        return self._list(
            "list pods", self._core.list_pod_for_all_namespaces, pace=pace, **selector
        )

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
    ) -> KubeObject:
        body = bodies.metadata_patch(annotations=annotations, labels=labels)
        return self._raw_json(
            "PATCH",
            _pod_path(namespace, name),
            f"patch pod {namespace}/{name}",
            body=body,
            content_type=MERGE_PATCH,
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
        context = f"bind pod {namespace}/{name} to node {node}"
        try:
            # The answer is a Status, not a Binding: success is the 2xx, nothing to parse.
            self._raw("POST", f"{_pod_path(namespace, name)}/binding", context, body=body)
        except KubeError as exc:
            raise as_binding_error(exc) from None

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
            path = f"/api/v1/namespaces/{_segment('namespace', namespace)}/events"
            self._raw("POST", path, f"create event for pod {namespace}/{pod}", body=body)
        except (KubeError, ValueError) as exc:
            logger.warning("event %s for pod %s/%s not recorded: %s", reason, namespace, pod, exc)

    def watch_pods(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        return self._watch(
            self._core.list_pod_for_all_namespaces, "pods", resource_version, timeout_s
        )

    # ----- nodes ---------------------------------------------------------------------

    def list_nodes(self) -> list[KubeObject]:
        return self.list_nodes_with_version().items

    def list_nodes_with_version(self, *, pace: Pace | None = None) -> Listing:
        return self._list("list nodes", self._core.list_node, pace=pace)

    def get_node(self, name: str) -> KubeObject | None:
        try:
            return self._call(f"get node {name}", self._core.read_node, name)
        except NotFound:
            return None

    def patch_node_annotations(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        body = bodies.metadata_patch(annotations=annotations, resource_version=resource_version)
        return self._raw_json(
            "PATCH",
            f"/api/v1/nodes/{_segment('node name', name)}",
            f"patch node {name}",
            body=body,
            content_type=MERGE_PATCH,
        )

    def watch_nodes(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        return self._watch(self._core.list_node, "nodes", resource_version, timeout_s)

    # ----- disruption budgets --------------------------------------------------------

    def list_pdbs(self) -> list[KubeObject]:
        body = self._raw_json(
            "GET", "/apis/policy/v1/poddisruptionbudgets", "list poddisruptionbudgets"
        )
        return _listing(body, "list poddisruptionbudgets").items

    # ----- leases --------------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> KubeObject | None:
        try:
            return self._raw_json(
                "GET", _lease_path(namespace, name), f"get lease {namespace}/{name}"
            )
        except NotFound:
            return None

    def create_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        return self._raw_json(
            "POST", _lease_path(namespace), f"create lease {namespace}", body=dict(lease)
        )

    def replace_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        meta = lease.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"lease metadata.name must be a non-empty string, got {name!r}")
        return self._raw_json(
            "PUT",
            _lease_path(namespace, name),
            f"replace lease {namespace}/{name}",
            body=dict(lease),
        )

    # ----- transport -----------------------------------------------------------------

    def _list(
        self, context: str, method: Callable[..., Any], *, pace: Pace | None, **kwargs: Any
    ) -> Listing:
        """Every object of a collection, ``LIST_PAGE`` at a time (``limit``, then each
        page's ``continue`` token), as client-go's informers list: one snapshot, whose
        resourceVersion every page carries.

        When a later page's token has expired (the snapshot was compacted away mid-list:
        a list slower than the server's compaction), the collection is listed again in
        one request, as client-go's pager does: listing again page by page could expire
        again, and again, with no pause between. ``pace`` is called between the
        objects as each page is decoded (``list_page``)."""
        try:
            return self._list_pages(context, method, pace=pace, **kwargs)
        except _ContinueExpired as exc:
            logger.warning("%s: %s; listing everything in one request", context, exc)
            body = self._call_list(context, method, pace=pace, **kwargs)
            listing = _listing(body, context)
            if _continue_token(body, context):
                # Paged though asked for whole: the rest would read as deleted.
                raise KubeError(f"{context}: the server paged a list asked for whole") from None
            return listing

    def _list_pages(
        self, context: str, method: Callable[..., Any], *, pace: Pace | None, **kwargs: Any
    ) -> Listing:
        items: list[KubeObject] = []
        version = ""
        token = ""
        tokens: set[str] = set()
        for _page in range(MOST_LIST_PAGES):
            page = {"limit": LIST_PAGE, **({"_continue": token} if token else {})}
            try:
                body = self._call_list(context, method, pace=pace, **kwargs, **page)
            except WatchExpired as exc:
                if not token:
                    raise  # not a token's expiry: the caller's to handle
                raise _ContinueExpired(str(exc)) from exc
            listing = _listing(body, context)
            items.extend(listing.items)
            version = version or listing.resource_version
            token = _continue_token(body, context)
            if not token:
                return Listing(items, version)
            # A list is a snapshot: a token seen before would page for ever.
            if token in tokens:
                raise KubeError(f"{context}: the server sent continue token {token[:40]!r} twice")
            tokens.add(token)
        raise KubeError(f"{context}: more than {MOST_LIST_PAGES} pages of {LIST_PAGE} objects")

    def _send(
        self, context: str, method: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> urllib3.BaseHTTPResponse:
        """Call a typed API method for its raw response; 2xx or a ``KubeError``."""
        kwargs.setdefault("_request_timeout", (self._timeouts.connect_s, self._timeouts.read_s))
        try:
            response: urllib3.BaseHTTPResponse = method(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            raise _api_error(exc, context) from None
        except _TRANSPORT_ERRORS as exc:
            raise transport_error(exc, context) from exc
        return response

    def _call(
        self, context: str, method: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> KubeObject:
        response = self._send(context, method, *args, **kwargs)
        return _decode(self._finish(context, response), context)

    def _call_list(
        self, context: str, method: Callable[..., Any], *, pace: Pace | None, **kwargs: Any
    ) -> KubeObject:
        """One page of a list of pods or nodes (``list_page``)."""
        response = self._send(context, method, **kwargs)
        return decode_page(self._finish(context, response), context, pace=pace)

    @staticmethod
    def _finish(context: str, response: urllib3.BaseHTTPResponse) -> bytes:
        """Read the whole body, so the connection goes back to the pool clean."""
        try:
            return response.data
        except _TRANSPORT_ERRORS as exc:
            raise transport_error(exc, context) from exc
        finally:
            response.release_conn()

    def _raw_json(
        self,
        method: str,
        path: str,
        context: str,
        *,
        body: dict[str, Any] | None = None,
        content_type: str = JSON,
    ) -> KubeObject:
        """A request by path whose answer is the object: decoded, or a ``KubeError``."""
        return _decode(
            self._raw(method, path, context, body=body, content_type=content_type), context
        )

    def _raw(
        self,
        method: str,
        path: str,
        context: str,
        *,
        body: dict[str, Any] | None = None,
        content_type: str = JSON,
    ) -> bytes:
        """Send ``body`` as JSON to ``path``; the answer's bytes when it is a 2xx.

        Anything else becomes the ``KubeError`` its ``Status`` body names; no answer
        at all a ``KubeError`` without a status: ``OutcomeUnknown`` once the request
        may have gone out (reset, closed, timed out), a plain one when no connection
        was made.
        """
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        # The client's own URL and authentication (a refreshed token included); the
        # body stays out of it, so that it is encoded exactly once, here.
        _method, url, headers, _body, _post = self._api.param_serialize(
            method=method, resource_path=path, header_params=headers, auth_settings=["BearerToken"]
        )
        data = None if body is None else msgspec.json.encode(body)
        connections = self._connections
        target = None if connections is None else connections.target(method, url)
        try:
            if connections is not None and target is not None:
                code, answer = connections.request(method, target, data, headers)
            else:
                response = self._api.rest_client.pool_manager.request(
                    method, url, body=data, headers=headers, timeout=self._timeout
                )
                code, answer = response.status, response.data
        except _TRANSPORT_ERRORS as exc:
            raise transport_error(exc, context) from exc
        if not 200 <= code <= 299:
            raise error_from_status(_status_of(answer), http_status=code, context=context)
        return answer

    def _watch(
        self,
        list_method: Callable[..., Any],
        kind: str,
        resource_version: str | None,
        timeout_s: int,
    ) -> Iterator[WatchEvent]:
        """Check the arguments now; the request starts at the first ``next()``."""
        check_watch_args(resource_version, timeout_s)
        return self._stream(list_method, kind, resource_version, timeout_s)

    def _stream(
        self,
        list_method: Callable[..., Any],
        kind: str,
        resource_version: str | None,
        timeout_s: int,
    ) -> Iterator[WatchEvent]:
        context = f"watch {kind} from {resource_version!r}"
        kwargs: dict[str, Any] = {"watch": True, "timeout_seconds": timeout_s}
        if not is_unversioned(resource_version) or resource_version == "0":
            kwargs["resource_version"] = resource_version
        read_timeout = timeout_s + self._timeouts.watch_slack_s
        response = self._send(
            context,
            list_method,
            _request_timeout=(self._timeouts.connect_s, read_timeout),
            **kwargs,
        )
        try:
            for line in _lines(response):
                event = _decode(line, context)
                kind_of_event, obj = event.get("type"), event.get("object")
                if kind_of_event == "ERROR":
                    status = obj if isinstance(obj, dict) else None
                    raise error_from_status(status, http_status=None, context=context)
                if kind_of_event == "BOOKMARK":
                    continue
                if kind_of_event not in _WATCH_TYPES or not isinstance(obj, dict):
                    raise KubeError(f"{context}: unexpected watch event {line[:200]!r}")
                yield kind_of_event, obj
        except _TRANSPORT_ERRORS as exc:
            raise KubeError(f"{context}: the stream broke: {exc}") from exc
        finally:
            response.close()
            response.release_conn()


class _ContinueExpired(Exception):  # noqa: N818
    """A later page's continue token has expired (410)."""


def _listing(body: KubeObject, context: str) -> Listing:
    items = body.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise KubeError(f"{context}: 'items' should be a list, got {type(items).__name__}")
    # An object left out would read as deleted (its pod's devices released): refuse the
    # whole page instead.
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise KubeError(
                f"{context}: item #{position} should be an object, got {type(item).__name__}"
            )
    metadata = body.get("metadata") or {}
    return Listing(items, str(metadata.get("resourceVersion") or ""))


def _continue_token(body: KubeObject, context: str) -> str:
    """The page's ``metadata.continue`` ("" on the last page). A last page that says
    objects remain (``remainingItemCount``) is a list cut short: refused, since the
    objects missing from it would read as deleted."""
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    token = metadata.get("continue")
    if token is None or token == "":
        remaining = metadata.get("remainingItemCount")
        if isinstance(remaining, int) and not isinstance(remaining, bool) and remaining > 0:
            raise KubeError(
                f"{context}: the list ended with {remaining} objects left and no continue token"
            )
        return ""
    if not isinstance(token, str):
        raise KubeError(
            f"{context}: 'metadata.continue' should be a string, got {type(token).__name__}"
        )
    return token


def _segment(field: str, value: str) -> str:
    """One path segment, quoted, so a name cannot reach another resource."""
    if not isinstance(value, str) or not value or "/" in value:
        raise ValueError(f"{field} must be a non-empty name, got {value!r}")
    return quote(value, safe="")


def _pod_path(namespace: str, name: str) -> str:
    return (
        f"/api/v1/namespaces/{_segment('namespace', namespace)}/pods/{_segment('pod name', name)}"
    )


def _lease_path(namespace: str, name: str | None = None) -> str:
    base = (
        f"/apis/coordination.k8s.io/v1/namespaces/{_segment('lease namespace', namespace)}/leases"
    )
    return base if name is None else f"{base}/{_segment('lease name', name)}"
