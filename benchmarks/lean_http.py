"""A lean keep-alive HTTP/1.1 client for the benchmarks' stand-in of kube-scheduler.

kube-scheduler calls the extender with Go's ``net/http``, which spends a few
microseconds per request. ``http.client`` spends hundreds here (it builds headers one
call at a time and parses the answer's with the ``email`` package), and on a small
machine the benchmark's client shares the cores with the extender it measures. This
one writes a prepared request head and the body in one ``sendall`` and reads only the
status line and ``Content-Length`` of the answer; anything else it does not handle (a
chunked answer, a malformed head) raises, so it can never misread an answer.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 64 * 1024


class LeanConnection:
    """One keep-alive connection; ``post`` returns (status, body)."""

    def __init__(self, url: str, *, timeout_s: float = 60.0) -> None:
        address = urlsplit(url)
        self._address = (address.hostname or "127.0.0.1", address.port or 80)
        self._host = f"{self._address[0]}:{self._address[1]}".encode()
        self._timeout_s = timeout_s
        self._socket: socket.socket | None = None
        self._buffer = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n" % (
            path.encode(),
            self._host,
        )
        sock = self._connected()
        sock.sendall(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        status, length, close = self._read_head(sock)
        answer = self._read_exactly(sock, length)
        if close:
            self.close()
        return status, answer

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._buffer = b""

    def _connected(self) -> socket.socket:
        if self._socket is None:
            sock = socket.create_connection(self._address, timeout=self._timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socket = sock
        return self._socket

    def _read_head(self, sock: socket.socket) -> tuple[int, int, bool]:
        while (end := self._buffer.find(_HEAD_END)) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise ValueError("answer head longer than 64 KiB")
            self._receive(sock)
        head, self._buffer = self._buffer[:end], self._buffer[end + len(_HEAD_END) :]
        status_line, *fields = head.split(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ValueError(f"malformed status line {status_line[:80]!r}")
        length: int | None = None
        close = parts[0] == b"HTTP/1.0"
        for field in fields:
            name, _, value = field.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                raise ValueError(f"answer uses transfer-encoding {value.strip()!r}")
            elif name == b"connection":
                close = b"close" in value.lower()
        if length is None:
            raise ValueError("answer has no Content-Length")
        return int(parts[1]), length, close

    def _read_exactly(self, sock: socket.socket, length: int) -> bytes:
        while len(self._buffer) < length:
            self._receive(sock)
        answer, self._buffer = self._buffer[:length], self._buffer[length:]
        return answer

    def _receive(self, sock: socket.socket) -> None:
        chunk = sock.recv(262144)
        if not chunk:
            self.close()
            raise ConnectionError("the server closed the connection mid-answer")
        self._buffer += chunk
