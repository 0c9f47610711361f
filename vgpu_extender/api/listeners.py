"""The ports the extender listens on, and which endpoints each one serves.

One process, one app, up to three listeners: the main port (``host``/``port``) for
kube-scheduler's verbs; with ``admin_port`` set, a second one for the admin API, the
webhook and gpushare's inspect, so the verbs port need not be reachable from the
cluster at all; with ``metrics_port`` set, one for ``/metrics`` (Prometheus). Health
(``/healthz``, ``/readyz``) answers on every port. A request is told apart by the
local port it arrived on (the ASGI scope's ``server``), never by anything the client
sends; what a port does not serve answers 404.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import StrEnum

from starlette.types import Scope, Send

from vgpu_extender.api.routes.extender import VERBS
from vgpu_extender.settings import Settings

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
METRICS_PATH = "/metrics"
_NOT_FOUND = b'{"detail":"Not Found"}'


class Surface(StrEnum):
    """A group of endpoints that moves between ports together."""

    VERBS = "verbs"
    HEALTH = "health"
    METRICS = "metrics"
    #: The admin API, the webhook, gpushare's inspect, the API docs.
    ADMIN = "admin"


def surface_of(path: str) -> Surface:
    if path in VERBS:
        return Surface.VERBS
    if path in HEALTH_PATHS:
        return Surface.HEALTH
    if path == METRICS_PATH:
        return Surface.METRICS
    return Surface.ADMIN


@dataclass(frozen=True, slots=True)
class Listener:
    """One listening address and what it serves."""

    name: str
    host: str
    port: int
    serves: frozenset[Surface]


def listeners(settings: Settings) -> list[Listener]:
    """The main listener first, then the admin and metrics ones that are set.

    Metrics go to their own port when set, else to the admin port when set, else to
    the main port; the admin surface to the admin port when set, else the main one.
    """
    admin, metrics = settings.admin_port, settings.metrics_port
    main = {Surface.VERBS, Surface.HEALTH}
    if admin is None:
        main.add(Surface.ADMIN)
        if metrics is None:
            main.add(Surface.METRICS)
    found = [Listener("main", settings.host, settings.port, frozenset(main))]
    if admin is not None:
        serves = {Surface.ADMIN, Surface.HEALTH}
        if metrics is None:
            serves.add(Surface.METRICS)
        found.append(
            Listener("admin", settings.admin_host or settings.host, admin, frozenset(serves))
        )
    if metrics is not None:
        host = settings.metrics_host or settings.host
        found.append(
            Listener("metrics", host, metrics, frozenset({Surface.METRICS, Surface.HEALTH}))
        )
    return found


class PortRouter:
    """Whether a request's port serves its path (only built when a second port is set)."""

    def __init__(self, settings: Settings) -> None:
        found = listeners(settings)
        self._main = found[0].serves
        self._by_port = {listener.port: listener.serves for listener in found[1:]}

    def allows(self, scope: Scope) -> bool:
        server = scope.get("server")
        port = server[1] if server else None
        serves = self._by_port.get(port, self._main) if port is not None else self._main
        return surface_of(scope["path"]) in serves


async def not_found(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_NOT_FOUND)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _NOT_FOUND})


def bind_sockets(settings: Settings) -> list[tuple[Listener, socket.socket]]:
    """A bound socket per listener (uvicorn listens on them). Raises ``OSError`` naming
    the setting whose address cannot be had."""
    bound: list[tuple[Listener, socket.socket]] = []
    try:
        for listener in listeners(settings):
            bound.append((listener, _bind(listener)))
    except OSError:
        for _listener, sock in bound:
            sock.close()
        raise
    return bound


def _bind(listener: Listener) -> socket.socket:
    setting = {"main": "host/port", "admin": "admin_host/admin_port"}.get(
        listener.name, "metrics_host/metrics_port"
    )
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            listener.host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(
            f"cannot listen on {listener.host}:{listener.port} ({setting}): {exc}"
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(
            f"cannot listen on {listener.host}:{listener.port} ({setting}): {exc}"
        ) from None
    return sock
