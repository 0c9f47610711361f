"""A small Kubernetes-API-compatible HTTP server for tests.

The real ``kubernetes`` Python client talks to it over real HTTP on 127.0.0.1: pods,
nodes, bindings, events, leases and PodDisruptionBudgets, lists with field and label
selectors, merge patches with resourceVersion preconditions, and watches streamed as
chunked, newline-delimited events (so ``kubernetes.watch.Watch().stream`` works too).
Objects live in an :class:`InMemoryCluster`, the store the in-memory fake client
uses, so both see the same semantics. ``fail_next`` injects HTTP failures;
``drop_next`` and ``close_after_next`` cut connections; ``lose_answer_next`` applies a
request and then loses its answer (a 504, a closed connection, a late commit). With
``ssl_context`` it serves HTTPS.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

import msgspec
from kubernetes import client as k8s

from tests.support.apiroutes import Reply, Request, Stream, route, status_body
from vgpu_extender.kube.errors import KubeError
from vgpu_extender.kube.memory import InMemoryCluster
from vgpu_extender.kube.objects import KubeObject

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    message: str


#: What the API server answers when its handler timeout passes (the request may still
#: complete behind it).
TIMEOUT_MESSAGE = (
    "Timeout: request did not complete within requested timeout - context deadline exceeded"
)
LOSSES = ("504", "close", "late", "drop")


@dataclass
class _Loss:
    method: str
    pattern: re.Pattern[str]
    how: str
    times: int
    delay_s: float
    before: Callable[[], None] | None


class _HttpServer(ThreadingHTTPServer):
    """Tracks open connections so ``stop`` can cut idle keep-alive ones."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, api: FakeApiServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        if self.api.ssl_context is not None:
            # The handshake runs in the connection's own thread (``_Handler.handle``).
            conn = self.api.ssl_context.wrap_socket(
                conn, server_side=True, do_handshake_on_connect=False
            )
        with self.connections_lock:
            self.connections.add(conn)
        return conn, address

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked watch streams
    # Headers and body go out in separate writes: without this, Nagle's algorithm and
    # the client's delayed ACK add 40 ms to every keep-alive request.
    disable_nagle_algorithm = True
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is ``FakeApiServer.requests``."""

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()
            except OSError:
                return  # the client refused the certificate, or went away
        super().handle()

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _serve(self) -> None:
        api = self.server.api
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if api.take_drop():
            api.dropped.append((self.command, split.path))
            self.close_connection = True  # no answer at all
            return
        api.requests.append((self.command, split.path))
        api.client_ports.append((self.command, split.path, self.client_address[1]))
        loss = api.take_loss(self.command, split.path)
        if loss is not None:
            self._lose(loss, split, body)
            return
        self._answer(split, body)
        if api.take_close_after():
            self.close_connection = True  # with no ``Connection: close``, as an idle timeout

    def _answer(self, split: SplitResult, body: bytes) -> None:
        api = self.server.api
        fault = api.take_fault(self.command, split.path)
        if fault is not None:
            self._reply(Reply(fault.status, _status_for(fault.status, fault.message)))
            return
        request = self._request(split, body)
        try:
            result = route(api.cluster, request, api.default_watch_timeout_s)
        except KubeError as exc:
            status = exc.status or 500
            reason = exc.reason or _REASONS.get(status, "InternalError")
            self._reply(Reply(status, status_body(status, reason, exc.message)))
            return
        if isinstance(result, Stream):
            self._stream(result)
        else:
            self._reply(result)

    def _request(self, split: SplitResult, body: bytes) -> Request:
        return Request(
            method=self.command,
            path=split.path.rstrip("/") or "/",
            query=dict(parse_qsl(split.query)),
            content_type=(self.headers.get("Content-Type") or "").split(";")[0].strip(),
            body=body,
        )

    def _lose(self, loss: _Loss, split: SplitResult, body: bytes) -> None:
        """Apply the request, then lose its answer as ``loss`` says."""
        api = self.server.api
        if loss.how == "drop":
            self.close_connection = True  # nothing applied, nothing answered
            return
        if loss.delay_s:
            time.sleep(loss.delay_s)  # past the client's read timeout: it has given up
        if loss.before is not None:
            loss.before()
        try:
            result = route(api.cluster, self._request(split, body), api.default_watch_timeout_s)
        except KubeError as exc:
            status = exc.status or 500
            result = Reply(status, status_body(status, exc.reason or "InternalError", exc.message))
        if loss.how == "504":
            self._reply(Reply(504, status_body(504, "Timeout", TIMEOUT_MESSAGE)))
            return
        if loss.how == "late" and isinstance(result, Reply):
            with contextlib.suppress(OSError):  # the client is gone, most likely
                self._reply(result)
        self.close_connection = True

    def _reply(self, reply: Reply) -> None:
        data = msgspec.json.encode(reply.body)
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, stream: Stream) -> None:
        with self.server.api.streaming:
            self._write_stream(stream)

    def _write_stream(self, stream: Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in stream.events:
                line = msgspec.json.encode(event) + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client ended the watch early


def _status_for(status: int, message: str) -> dict[str, Any]:
    reason = _REASONS.get(status, "InternalError")
    return status_body(status, reason, message or f"injected failure ({status} {reason})")


class _Count:
    """How many of something are under way (``with count:``), and a wait for none."""

    def __init__(self) -> None:
        self._value = 0
        self._changed = threading.Condition()

    def __enter__(self) -> None:
        with self._changed:
            self._value += 1

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self._value -= 1
            self._changed.notify_all()

    def wait_for_none(self, *, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._value == 0, timeout_s)


class FakeApiServer:
    """A Kubernetes API server in a thread, on 127.0.0.1 and a free port."""

    def __init__(
        self,
        *,
        history_limit: int = 10_000,
        default_watch_timeout_s: int = 30,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.cluster = InMemoryCluster(history_limit=history_limit)
        self.default_watch_timeout_s = default_watch_timeout_s
        self.ssl_context = ssl_context
        self.requests: list[tuple[str, str]] = []
        # (method, path, the client's port): which connection each request came on.
        self.client_ports: list[tuple[str, str, int]] = []
        self.dropped: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self._losses: list[_Loss] = []
        self._drops = 0
        self._closes = 0
        self._faults_lock = threading.Lock()
        #: Watches being written: stop lets them end cleanly before closing sockets.
        self.streaming = _Count()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -----------------------------------------------------------------

    def start(self) -> FakeApiServer:
        if self._httpd is not None:
            raise RuntimeError("the fake API server is already started")
        self._httpd = _HttpServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # how long stop() waits for the loop to notice
            name="fake-apiserver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.cluster.close()  # ends open watches
        # Let each write its last chunk: a socket shut under a watch mid-answer would
        # read as a broken connection rather than as the end of the watch.
        self.streaming.wait_for_none(timeout_s=10.0)
        httpd.shutdown()
        with httpd.connections_lock:
            for conn in list(httpd.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake API server is not started")
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def open_connections(self) -> int:
        """Client connections the server holds open now."""
        if self._httpd is None:
            return 0
        with self._httpd.connections_lock:
            return len(self._httpd.connections)

    def configuration(self) -> k8s.Configuration:
        """A client configuration for this server (no auth, never through a proxy)."""
        return k8s.Configuration(host=self.url, no_proxy="127.0.0.1,localhost")

    # ----- state helpers -------------------------------------------------------------

    def add_node(self, node: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("nodes", node)

    def add_pod(self, pod: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("pods", pod)

    def add_pdb(self, pdb: Mapping[str, Any]) -> KubeObject:
        return self.cluster.put("poddisruptionbudgets", pdb)

    def get_pod(self, namespace: str, name: str) -> KubeObject:
        return self.cluster.require("pods", namespace, name)

    def get_node(self, name: str) -> KubeObject:
        return self.cluster.require("nodes", "", name)

    def delete_pod(self, namespace: str, name: str) -> KubeObject:
        return self.cluster.delete("pods", namespace, name)

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> KubeObject:
        return self.cluster.patch("pods", namespace, name, {"status": {"phase": phase}})

    def compact(self) -> None:
        """Forget the change history: watches from older versions now get 410 Gone."""
        self.cluster.compact()

    @property
    def bindings(self) -> list[KubeObject]:
        return self.cluster.bindings

    @property
    def events(self) -> list[KubeObject]:
        return self.cluster.events

    # ----- fault injection -----------------------------------------------------------

    def fail_next(
        self, method: str, path_regex: str, status: int, times: int = 1, *, message: str = ""
    ) -> None:
        """Answer the next ``times`` requests of ``method`` on a matching path with ``status``.

        The body is a ``Status`` with the usual reason for that code and ``message``.
        """
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code, got {status!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        with self._faults_lock:
            self._faults.append(
                _Fault(method.upper(), re.compile(path_regex), status, times, message)
            )

    def lose_answer_next(
        self,
        method: str,
        path_regex: str,
        how: str,
        *,
        times: int = 1,
        delay_s: float = 0.0,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Apply the next ``times`` requests of ``method`` on a matching path, then lose
        the answer, as ``how`` says:

        - ``"504"``: answer 504 ``Timeout`` with the API server's Status (its handler
          timeout passed while the write went through);
        - ``"close"``: close the connection without a word;
        - ``"late"``: apply it only after ``delay_s`` (past the client's read timeout),
          then answer a client that has most likely gone;
        - ``"drop"``: the contrast, nothing applied: close the connection unanswered.

        ``before`` runs in the server just before the request is applied (someone else
        binding the pod meanwhile, say). The request is logged in ``requests``.
        """
        if how not in LOSSES:
            raise ValueError(f"how must be one of {', '.join(LOSSES)}, got {how!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s!r}")
        with self._faults_lock:
            self._losses.append(
                _Loss(method.upper(), re.compile(path_regex), how, times, delay_s, before)
            )

    def take_loss(self, method: str, path: str) -> _Loss | None:
        if not self._losses:  # the usual case, without the lock
            return None
        with self._faults_lock:
            for loss in self._losses:
                if loss.method == method and loss.pattern.search(path):
                    loss.times -= 1
                    if loss.times == 0:
                        self._losses.remove(loss)
                    return loss
        return None

    def drop_next(self, times: int = 1) -> None:
        """Close the connection of the next ``times`` requests once read, with no answer.

        As a server does that closes an idle keep-alive connection just as a request
        arrives on it. Dropped requests are logged in ``dropped``, not ``requests``.
        """
        with self._faults_lock:
            self._drops += times

    def close_after_next(self, times: int = 1) -> None:
        """Answer the next ``times`` requests, then close their connections."""
        with self._faults_lock:
            self._closes += times

    def take_drop(self) -> bool:
        if not self._drops:  # the usual case, without the lock
            return False
        with self._faults_lock:
            if self._drops == 0:
                return False
            self._drops -= 1
            return True

    def take_close_after(self) -> bool:
        if not self._closes:  # the usual case, without the lock
            return False
        with self._faults_lock:
            if self._closes == 0:
                return False
            self._closes -= 1
            return True

    def take_fault(self, method: str, path: str) -> _Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.method == method and fault.pattern.search(path):
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                    return fault
        return None
