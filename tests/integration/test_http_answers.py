"""Answers on the wire through ``serve``'s HTTP protocol, where writes are joined per
event-loop turn (``serving/joined_writes.py``): every kind of answer still arrives whole
and in order over a real socket, the interim ``100 Continue`` included (the client
waits for it before it sends its body)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from vgpu_extender.serving.limits import connection_limits
from vgpu_extender.settings import Settings

_HEAD = [(b"content-type", b"text/plain")]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers shaped as the extender's are, and as its streamed and empty ones are."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    if path == "/echo":  # one head and one body, as every verb's answer
        headers = [*_HEAD, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif path == "/stream":  # a head, then chunks in later turns of the loop
        await send({"type": "http.response.start", "status": 200, "headers": _HEAD})
        for part in (b"one ", b"two ", b"three"):
            await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/empty":  # a head alone: nothing follows it in the same turn
        headers = [(b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await asyncio.sleep(1.0)
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def port() -> Iterator[int]:
    settings = Settings(kube_mode="off")
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        **connection_limits(settings).uvicorn_options(),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(10)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Answers:
    """The answers coming in on one connection, read one at a time; bytes of the next
    answer that came in with this one are kept for it (pipelined answers may share a
    read)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._data = b""

    def _until(self, marker: bytes) -> bytes:
        while marker not in self._data:
            self._more()
        taken, _, self._data = self._data.partition(marker)
        return taken

    def _take(self, count: int) -> bytes:
        while len(self._data) < count:
            self._more()
        taken, self._data = self._data[:count], self._data[count:]
        return taken

    def _more(self) -> None:
        data = self._sock.recv(65536)
        assert data, "the server closed the connection mid-answer"
        self._data += data

    def next(self) -> tuple[bytes, bytes, bytes]:
        """One answer: its status line, its headers and its body (by length or chunks)."""
        head = self._until(b"\r\n\r\n")
        status, _, headers = head.partition(b"\r\n")
        fields = dict(line.lower().split(b": ", 1) for line in headers.split(b"\r\n") if line)
        if b"content-length" in fields:
            return status, headers, self._take(int(fields[b"content-length"]))
        body = b""
        while True:  # chunked
            size = int(self._until(b"\r\n"), 16)
            body += self._take(size)
            assert self._take(2) == b"\r\n"
            if size == 0:
                return status, headers, body


def _read_answer(sock: socket.socket) -> tuple[bytes, bytes, bytes]:
    """One answer on a connection that carries one at a time."""
    return _Answers(sock).next()


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    assert data, "the server closed the connection mid-answer"
    return data


def _request(path: str, body: bytes = b"", extra: bytes = b"") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: test\r\ncontent-length: {len(body)}\r\n".encode()
        + extra
        + b"\r\n"
        + body
    )


def test_an_answer_arrives_whole(port: int) -> None:
    payload = b'{"NodeNames":["a","b"]}' * 4000  # larger than one read
    with _connect(port) as sock:
        sock.sendall(_request("/echo", payload))
        status, _, body = _read_answer(sock)
    assert status == b"HTTP/1.1 200 OK"
    assert body == payload


def test_answers_on_one_connection_come_in_order(port: int) -> None:
    with _connect(port) as sock:
        for number in range(20):
            sock.sendall(_request("/echo", b"answer %d" % number))
            assert _read_answer(sock)[2] == b"answer %d" % number


def test_pipelined_requests_are_answered_in_order(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"".join(_request("/echo", b"pipelined %d" % n) for n in range(5)))
        answers = _Answers(sock)
        bodies = [answers.next()[2] for _ in range(5)]
    assert bodies == [b"pipelined %d" % n for n in range(5)]


def test_the_interim_continue_comes_before_the_client_sends_its_body(port: int) -> None:
    body = b"sent only once asked for"
    head = _request("/echo", body, extra=b"expect: 100-continue\r\n")[: -len(body)]
    with _connect(port) as sock:
        sock.sendall(head)
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += _recv(sock)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, _, answered = _read_answer(sock)
    assert (status, answered) == (b"HTTP/1.1 200 OK", body)


def test_a_streamed_answer_arrives_chunk_by_chunk(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_request("/stream"))
        status, headers, body = _read_answer(sock)
        # The connection stays usable after it.
        sock.sendall(_request("/echo", b"after"))
        assert _read_answer(sock)[2] == b"after"
    assert status == b"HTTP/1.1 200 OK"
    assert b"transfer-encoding: chunked" in headers.lower()
    assert body == b"one two three"


def test_a_head_alone_is_not_held_back(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_request("/empty"))
        sock.settimeout(0.5)  # the app finishes a second later; the head must not wait
        data = b""
        while b"\r\n\r\n" not in data:
            data += _recv(sock)
    assert data.startswith(b"HTTP/1.1 204 No Content\r\n")
