"""The agent's small HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz``.

The standard library's threading server is enough for a scrape every few seconds
and kubelet's probes; it keeps the node agent's image free of a web framework.
A probe answers 200 ``ok`` or 503 with the reason, which ``kubectl describe pod``
shows in the probe's failure event.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

#: A probe's answer: None when fine, else why not.
Probe = Callable[[], str | None]


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _V6Server(_Server):
    address_family = socket.AF_INET6


class StatusServer:
    """Serves the three routes on ``(host, port)`` in a daemon thread."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        metrics: Callable[[], bytes],
        live: Probe,
        ready: Probe,
        idle_timeout_s: float = 10.0,
    ) -> None:
        self._address = address
        #: A client that sends nothing for this long is dropped: each connection holds a
        #: thread, and a silent one would hold it for good.
        self._idle_timeout_s = idle_timeout_s
        self._routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics()),
            "/healthz": lambda: _probe(live),
            "/readyz": lambda: _probe(ready),
        }
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the one the system chose when asked for port 0)."""
        if self._server is None:
            raise RuntimeError("the status server is not running")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Bind and serve; raises ``OSError`` when the address is taken or invalid."""
        routes = self._routes
        idle_timeout_s = self._idle_timeout_s

        class Handler(BaseHTTPRequestHandler):
            server_version = "vgpu-device-plugin"
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout_s

            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                if route is None:
                    status, content_type, body = 404, "text/plain", b"not found\n"
                else:
                    try:
                        status, content_type, body = route()
                    except Exception:  # a broken collector: an answer, and the log says why
                        log.exception("status endpoint %s failed", self.path)
                        status, content_type, body = 500, "text/plain", b"internal error\n"
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                # Probes and scrapes every few seconds would drown the agent's log.
                log.debug("%s " + format, self.address_string(), *args)

        host = self._address[0]
        server_class = _V6Server if ":" in host else _Server
        self._server = server_class(self._address, Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="status-http", daemon=True
        )
        self._thread.start()
        log.info("metrics and probes on http://%s:%d", host, self.port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _probe(check: Probe) -> tuple[int, str, bytes]:
    try:
        problem = check()
    except Exception as exc:  # a probe that fails says so instead of dropping the socket
        log.exception("probe failed")
        problem = f"probe error: {exc}"
    if problem is None:
        return 200, "text/plain; charset=utf-8", b"ok\n"
    return 503, "text/plain; charset=utf-8", f"{problem}\n".encode()
