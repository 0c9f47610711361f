"""``KubeClient`` on the official ``kubernetes`` Python client.

Every call passes ``_preload_content=False`` and decodes the raw body with msgspec,
so objects come back as plain dicts without model parsing. That is also the fix for
the client's Binding pitfall: ``create_namespaced_pod_binding`` raises *after* a
successful call when it tries to read the server's ``Status`` answer as a
``V1Binding`` (kubernetes-client/python#547, #825); with the raw response nothing is
parsed and success is the 2xx status.

Leases go through the client's raw request path instead of the typed methods: the
typed ``V1Lease`` writes ``acquireTime``/``renewTime`` with ``isoformat()``, which
leaves out zero fractional seconds that the API server's MicroTime parser requires.

No client-side rate limiting: the official client has none, and the extender's
call rate is bounded by kube-scheduler's own.
"""

from __future__ import annotations

import logging
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
    WatchEvent,
    check_watch_args,
    is_unversioned,
)
from vgpu_extender.kube.config import Timeouts
from vgpu_extender.kube.errors import (
    KubeError,
    NotFound,
    as_binding_error,
    error_from_status,
)
from vgpu_extender.kube.objects import KubeObject

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


def _decode(data: bytes, context: str) -> KubeObject:
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise KubeError(f"{context}: the API server sent invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise KubeError(f"{context}: the API server sent {type(value).__name__}, not an object")
    return value


def _api_error(exc: ApiException, context: str) -> KubeError:
    status: Any = None
    if exc.body:
        try:
            status = msgspec.json.decode(exc.body)
        except msgspec.DecodeError:
            status = {"message": str(exc.body)[:300]}
    if not isinstance(status, dict):
        status = None
    return error_from_status(status, http_status=exc.status, context=context)


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
        self._component = component
        self._clock = clock

    @classmethod
    def from_configuration(cls, configuration: k8s.Configuration, **kwargs: Any) -> RealKubeClient:
        return cls(k8s.ApiClient(configuration), **kwargs)

    def close(self) -> None:
        """Close the connection pool."""
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

    def list_pods_with_version(self, *, node: str | None = None) -> Listing:
        selector = {} if node is None else {"field_selector": f"spec.nodeName={node}"}
        body = self._call("list pods", self._core.list_pod_for_all_namespaces, **selector)
        return _listing(body, "list pods")

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
    ) -> KubeObject:
        body = bodies.metadata_patch(annotations=annotations, labels=labels)
        return self._call(
            f"patch pod {namespace}/{name}",
            self._core.patch_namespaced_pod,
            name,
            namespace,
            body,
            _content_type=MERGE_PATCH,
        )

    def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = k8s.V1Binding.model_validate(bodies.binding(namespace, name, uid, node))
        context = f"bind pod {namespace}/{name} to node {node}"
        try:
            response = self._send(
                context, self._core.create_namespaced_pod_binding, name, namespace, body
            )
        except KubeError as exc:
            raise as_binding_error(exc) from None
        # The answer is a Status, not a Binding: read past it, parse nothing.
        self._finish(context, response)

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
            event = k8s.CoreV1Event.model_validate(body)
            context = f"create event for pod {namespace}/{pod}"
            response = self._send(context, self._core.create_namespaced_event, namespace, event)
            self._finish(context, response)
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

    def list_nodes_with_version(self) -> Listing:
        return _listing(self._call("list nodes", self._core.list_node), "list nodes")

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
        return self._call(
            f"patch node {name}", self._core.patch_node, name, body, _content_type=MERGE_PATCH
        )

    def watch_nodes(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        return self._watch(self._core.list_node, "nodes", resource_version, timeout_s)

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
            raise KubeError(f"{context}: {exc}") from exc
        return response

    def _call(
        self, context: str, method: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> KubeObject:
        response = self._send(context, method, *args, **kwargs)
        return _decode(self._finish(context, response), context)

    @staticmethod
    def _finish(context: str, response: urllib3.BaseHTTPResponse) -> bytes:
        """Read the whole body, so the connection goes back to the pool clean."""
        try:
            return response.data
        except _TRANSPORT_ERRORS as exc:
            raise KubeError(f"{context}: {exc}") from exc
        finally:
            response.release_conn()

    def _raw_json(
        self, method: str, path: str, context: str, *, body: dict[str, Any] | None = None
    ) -> KubeObject:
        """A request by path, for bodies the typed models would rewrite."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        timeout = (self._timeouts.connect_s, self._timeouts.read_s)
        try:
            response = self._api.call_api(*request, _request_timeout=timeout)
            data = response.read()  # type: ignore[no-untyped-call]
        except _TRANSPORT_ERRORS as exc:
            raise KubeError(f"{context}: {exc}") from exc
        if not 200 <= response.status <= 299:
            status = _decode(data, context) if data else None
            raise error_from_status(status, http_status=response.status, context=context)
        return _decode(data, context)

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


def _listing(body: KubeObject, context: str) -> Listing:
    items = body.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise KubeError(f"{context}: 'items' should be a list, got {type(items).__name__}")
    metadata = body.get("metadata") or {}
    return Listing(items, str(metadata.get("resourceVersion") or ""))


def _lease_path(namespace: str, name: str | None = None) -> str:
    """The path with each segment quoted, so a name cannot reach another resource."""
    for field, value in (("namespace", namespace), ("name", name)):
        if value is not None and (not value or "/" in value):
            raise ValueError(f"lease {field} must be a non-empty name, got {value!r}")
    base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
    return base if name is None else f"{base}/{quote(name, safe='')}"
