"""A TCP proxy in front of PostgreSQL that cuts a connection at a chosen moment.

Real connection loss, at the wire: the client (psycopg) sees exactly what it sees when
a server dies or a network fails, at a moment a test picks. Armed once with
``cut(fault, sql)``, the proxy acts on the next message from a client whose query text
contains ``sql`` (case-insensitive), then passes everything through again:

- ``before``: the message is never forwarded; both sides are closed, so the server
  rolls the transaction back and the client sees the connection lost;
- ``after``: the message is forwarded, the server's first answer is awaited (so the
  server has carried it out: for ``COMMIT``, the transaction is durable) and dropped,
  and both sides are closed: the client sees the connection lost, its answer lost.

``times`` makes it act on that many such messages; ``refuse_after`` makes it, once it
has cut, close every new connection at once, as a server that is gone would.

Connect with ``sslmode=disable`` (the proxy reads the messages): ``url_for(url)``.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from typing import Literal

from sqlalchemy.engine import make_url

Fault = Literal["before", "after"]


class PgProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: tuple[Fault, bytes] | None = None
        self._times = 0
        self._refuse_after = False
        self.refusing = False
        #: How many cuts were made (a test checks its fault really happened).
        self.cuts = 0
        self._closing = False
        self._thread = threading.Thread(target=self._accept, name="pg-proxy", daemon=True)
        self._thread.start()

    @classmethod
    def before(cls, url: str) -> PgProxy:
        parsed = make_url(url)
        return cls(parsed.host or "127.0.0.1", parsed.port or 5432)

    def url_for(self, url: str) -> str:
        """``url`` through the proxy."""
        parsed = make_url(url).set(host="127.0.0.1", port=self.port)
        parsed = parsed.update_query_dict({"sslmode": "disable"})
        return parsed.render_as_string(hide_password=False)

    def cut(self, fault: Fault, sql: str, *, times: int = 1, refuse_after: bool = False) -> None:
        with self._lock:
            self._armed = (fault, sql.lower().encode())
            self._times = times
            self._refuse_after = refuse_after

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._armed is not None

    def close(self) -> None:
        self._closing = True
        self._listener.close()

    # ------------------------------------------------------------------ relaying
    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.refusing:
            client.close()
            return
        try:
            server = socket.create_connection(self._upstream)
        except OSError:
            client.close()
            return
        try:
            self._relay(client, server)
        except OSError:
            pass
        finally:
            client.close()
            server.close()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        # The startup message has no type byte: pass it through whole first.
        self._send_all(server, self._read_startup(client))
        while True:
            ready, _, _ = select.select([client, server], [], [])
            if server in ready:
                data = server.recv(65536)
                if not data:
                    return
                client.sendall(data)
            if client in ready:
                message = self._read_message(client)
                if message is None:
                    return
                fault = self._take(message)
                if fault == "before":
                    return
                server.sendall(message)
                if fault == "after":
                    server.recv(65536)  # the server has answered: it has done it
                    return

    def _take(self, message: bytes) -> Fault | None:
        """The armed fault, disarmed, when ``message`` is the query it waits for."""
        if message[:1] not in (b"Q", b"P"):
            return None
        with self._lock:
            if self._armed is None or self._armed[1] not in message.lower():
                return None
            fault = self._armed[0]
            self._times -= 1
            if self._times <= 0:
                self._armed = None
                self.refusing = self._refuse_after
            self.cuts += 1
            return fault

    @staticmethod
    def _read_exact(sock: socket.socket, size: int) -> bytes | None:
        chunks = b""
        while len(chunks) < size:
            data = sock.recv(size - len(chunks))
            if not data:
                return None
            chunks += data
        return chunks

    def _read_startup(self, sock: socket.socket) -> bytes:
        head = self._read_exact(sock, 4)
        if head is None:
            raise OSError("client left before its startup message")
        (length,) = struct.unpack("!I", head)
        body = self._read_exact(sock, length - 4)
        if body is None:
            raise OSError("client left during its startup message")
        return head + body

    def _read_message(self, sock: socket.socket) -> bytes | None:
        head = self._read_exact(sock, 5)
        if head is None:
            return None
        (length,) = struct.unpack("!I", head[1:])
        body = self._read_exact(sock, length - 4)
        return None if body is None else head + body

    @staticmethod
    def _send_all(sock: socket.socket, data: bytes) -> None:
        sock.sendall(data)
