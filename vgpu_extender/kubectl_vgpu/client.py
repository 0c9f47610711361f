"""The extender's admin API over HTTP, directly or through the API server's service proxy.

Directly (``--server``) the extender's admin token goes in ``Authorization``. Through
the proxy, ``Authorization`` carries our credentials for the API server, which removes
that header once it has authenticated us and forwards the others: the extender's token
goes in ``X-Vgpu-Admin-Token`` there instead (an extender that reads only
``Authorization`` answers 401, and the message says to use ``--server``, e.g. after
``kubectl port-forward``, or open reads). Every failure becomes one line
(:class:`PluginError`).
"""

from __future__ import annotations

import json
import ssl
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from vgpu_extender.kubectl_vgpu.errors import PluginError

if TYPE_CHECKING:
    import httpx

API = "/api/v1"
#: The extender's admin token when it cannot go in ``Authorization`` (the API server's
#: proxy consumes that header and forwards this one).
TOKEN_HEADER = "X-Vgpu-Admin-Token"


@dataclass(frozen=True)
class Endpoint:
    """Where ``/api/v1/...`` of the extender is, and how to talk to it."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    verify: ssl.SSLContext | bool = True
    proxied: bool = False
    #: What to call it in messages (the proxy URL says little to a reader).
    label: str = ""

    @classmethod
    def direct(cls, server: str, *, token: str | None, verify: ssl.SSLContext | bool) -> Endpoint:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        server = server.rstrip("/")
        return cls(server, headers, verify, False, f"the extender at {server}")

    @classmethod
    def through_proxy(
        cls,
        apiserver: str,
        *,
        namespace: str,
        service: str,
        port: str,
        scheme: str,
        headers: dict[str, str],
        verify: ssl.SSLContext | bool,
        token: str | None = None,
    ) -> Endpoint:
        """``{apiserver}/api/v1/namespaces/{ns}/services/{scheme}:{name}:{port}/proxy``,
        with ``headers`` for the API server and ``token`` for the extender."""
        target = ":".join(quote(part, safe="") for part in (scheme, service, port))
        url = (
            f"{apiserver.rstrip('/')}/api/v1/namespaces/{quote(namespace, safe='')}"
            f"/services/{target}/proxy"
        )
        label = f"service {namespace}/{service} (port {port}) through the API server {apiserver}"
        sent = {**headers, TOKEN_HEADER: token} if token else dict(headers)
        return cls(url, sent, verify, True, label)


class AdminClient:
    """GET and POST on the admin API, answers decoded, errors as one line."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        httpx = _import_httpx()  # not for --help or --version
        self._httpx = httpx
        self.endpoint = endpoint
        self._client = httpx.Client(
            base_url=endpoint.base_url,
            headers={"Accept": "application/json", **endpoint.headers},
            verify=endpoint.verify,
            timeout=timeout_s,
            transport=transport,
        )

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()

    def get(
        self, path: str, params: dict[str, str] | None = None, *, missing: str | None = None
    ) -> Any:
        return self._send("GET", path, params=params, missing=missing)

    def post(self, path: str, body: Any) -> Any:
        return self._send("POST", path, body=body)

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        missing: str | None = None,
    ) -> Any:
        httpx = self._httpx
        where = self.endpoint.label
        content = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        try:
            response = self._client.request(
                method, API + path, params=params, content=content, headers=headers
            )
        except httpx.ConnectError as exc:
            raise PluginError(f"cannot connect to {where}: {_reason(exc)}") from None
        except httpx.TimeoutException:
            raise PluginError(f"{where} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise PluginError(f"cannot talk to {where}: {_reason(exc)}") from None
        if response.status_code == 200:
            try:
                return response.json()
            except ValueError:
                raise PluginError(f"{where} sent an answer that is not JSON") from None
        raise self._failure(response.status_code, response.content, missing)

    def _failure(self, status: int, content: bytes, missing: str | None) -> PluginError:
        where = self.endpoint.label
        kube_status, detail = _error_text(content)
        if kube_status:  # the API server itself refused or could not forward
            return PluginError(f"the API server answered {status}: {detail}{_kube_hint(status)}")
        if status == 404 and missing is not None:
            return PluginError(missing)
        hint = ""
        if status in (401, 403) and not self.endpoint.proxied:
            hint = "; give the extender's admin token with --token or VGPU_ADMIN_TOKEN"
        elif status in (401, 403):
            hint = _PROXY_AUTH_HINT.format(
                sent="it went" if TOKEN_HEADER in self.endpoint.headers else "give --token: it goes"
            )
        return PluginError(f"{where} answered {status}: {detail}{hint}")


def _import_httpx() -> Any:
    """httpx, without its own command line.

    With httpx's ``cli`` extra installed, ``import httpx`` also imports ``httpx._main``
    (click, rich, pygments): about 40% of its import time, for a tool we never run. A
    ``None`` in ``sys.modules`` makes that import fail, which httpx expects and handles;
    the entry is removed again at once.
    """
    if "httpx" in sys.modules:
        return sys.modules["httpx"]
    blocked = "httpx._main" not in sys.modules
    if blocked:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        if blocked and sys.modules.get("httpx._main") is None:
            sys.modules.pop("httpx._main", None)
    return httpx


_PROXY_AUTH_HINT = (
    "; the API server's proxy does not pass Authorization on to the service, so the "
    f"extender's token travels in {TOKEN_HEADER} ({{sent}} there), which older extenders "
    "ignore: otherwise use --server (for instance with kubectl port-forward), or open "
    "the extender's reads (VGPU_OPEN_READS)"
)


def _kube_hint(status: int) -> str:
    if status in (401, 403):
        return " (your kubeconfig's user needs `get` on services/proxy in that namespace)"
    if status in (404, 503):
        return " (check --namespace, --service and --port, and that the extender runs)"
    return ""


def _error_text(content: bytes) -> tuple[bool, str]:
    """(from the API server?, the message): a Kubernetes Status, FastAPI's detail, text."""
    try:
        payload = json.loads(content)
    except ValueError:
        text = content.decode("utf-8", "replace").strip()
        return False, (text.splitlines()[0][:300] if text else "no message")
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        return True, str(payload.get("message") or payload.get("reason") or "no message")
    if isinstance(payload, dict) and "detail" in payload:
        detail = payload["detail"]
        if isinstance(detail, list):  # a validation error: where and what
            parts = [
                f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', '')}"
                for d in detail
                if isinstance(d, dict)
            ]
            return False, "; ".join(parts)[:500]
        return False, str(detail)[:500]
    return False, json.dumps(payload)[:300]


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text.splitlines()[0] if text else type(exc).__name__
