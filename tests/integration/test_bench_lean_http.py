"""The benchmarks' lean HTTP client, against a real HTTP server on 127.0.0.1: it keeps
the connection alive, reads exactly one answer per request, follows ``Connection:
close``, and refuses what it cannot read rather than misread it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.lean_http import LeanConnection


class Handler(BaseHTTPRequestHandler):
    """Echoes the body back, shaped by the path: ``/close``, ``/chunked``, ``/cut``,
    ``/missing`` (404)."""

    protocol_version = "HTTP/1.1"
    connections: list[object] = []

    def setup(self) -> None:
        super().setup()
        Handler.connections.append(self.client_address)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        answer = b"echo:" + body
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(answer), answer))
            return
        self.send_response(404 if self.path == "/missing" else 200)
        self.send_header("Content-Length", str(len(answer)))
        if self.path == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.path == "/cut":  # promised a body, then gone
            self.close_connection = True
            return
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    Handler.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_answers_are_read_whole_over_one_kept_alive_connection(url: str) -> None:
    connection = LeanConnection(url)
    big = b"x" * 300_000  # larger than one read
    assert connection.post("/filter", b'{"a": 1}') == (200, b'echo:{"a": 1}')
    assert connection.post("/filter", big) == (200, b"echo:" + big)
    assert connection.post("/missing", b"") == (404, b"echo:")
    assert len(Handler.connections) == 1
    connection.close()


def test_connection_close_opens_a_new_connection_next_time(url: str) -> None:
    connection = LeanConnection(url)
    assert connection.post("/close", b"1") == (200, b"echo:1")
    assert connection.post("/filter", b"2") == (200, b"echo:2")
    assert len(Handler.connections) == 2
    connection.close()


def test_an_answer_it_cannot_read_raises(url: str) -> None:
    with pytest.raises(ValueError, match="transfer-encoding b'chunked'"):
        LeanConnection(url).post("/chunked", b"1")
    with pytest.raises(ConnectionError, match="closed the connection mid-answer"):
        LeanConnection(url).post("/cut", b"1")
