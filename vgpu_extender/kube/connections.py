"""Keep-alive connections to the API server for small JSON writes.

Each thread keeps one persistent ``http.client`` connection (the API server keeps
connections open). A request costs about half the CPU it costs through the client's
urllib3 pool manager, whose per-call pool, retry and timeout bookkeeping weigh as much
as the work itself on the bind path.

It is only used where it behaves as the pool manager would: :meth:`ApiConnections.for_client`
reads the settings the ``kubernetes`` client built its pool manager with (so proxies,
``no_proxy`` and TLS options are taken as the client resolved them) and answers
``None`` for any it does not mirror: a proxy, ``tls_server_name``, ``assert_hostname``,
``retries``, ``debug``, or a setting it does not know.
"""

from __future__ import annotations

import http.client
import logging
import ssl
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from kubernetes import client as k8s
from urllib3.util import create_urllib3_context, resolve_cert_reqs, ssl_, wait_for_read

from vgpu_extender.kube.config import Timeouts

logger = logging.getLogger(__name__)

# urllib3's default Retry (3) never sends a POST or PATCH again once it went out, so
# these behave alike here; it does retry GET and PUT after a broken answer and on
# 429/503 with Retry-After, so those stay on the pool manager.
SERVED_METHODS = frozenset({"POST", "PATCH"})
# The same default Retry tries a failed connect (TCP or TLS handshake) 3 more times.
_CONNECT_ATTEMPTS = 4
_TLS_SETTINGS = frozenset({"cert_reqs", "ca_certs", "ca_cert_data", "cert_file", "key_file"})
# ``maxsize`` only bounds how many idle connections the pool keeps: one per thread here.
_MIRRORED = _TLS_SETTINGS | {"socket_options", "maxsize"}

# No answer at all: the server closed the connection before reading the request, or
# reset it. On a connection that served before, that is a stale keep-alive one.
_NO_ANSWER = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)

SocketOption = tuple[int, int, int]


class ConnectFailed(OSError):  # noqa: N818
    """No connection could be made: the request never went out, so nothing was applied."""


@dataclass(frozen=True, slots=True)
class _Tls:
    """The pool manager's TLS settings, made into a context as urllib3 makes it."""

    cert_reqs: ssl.VerifyMode
    ca_certs: str | None
    ca_cert_data: str | bytes | None
    cert_file: str | None
    key_file: str | None

    def context(self) -> ssl.SSLContext:
        """A new context per connection, as urllib3 does: rotated files are read again."""
        context = create_urllib3_context(cert_reqs=self.cert_reqs)
        context.verify_mode = self.cert_reqs
        if self.ca_certs or self.ca_cert_data:
            context.load_verify_locations(self.ca_certs, None, self.ca_cert_data)
        else:
            context.load_default_certs()
        context.set_alpn_protocols(["http/1.1"])
        if self.cert_file:
            # An empty password fails on an encrypted key instead of prompting for one.
            context.load_cert_chain(self.cert_file, self.key_file, password="")
        return context


class _Slot(threading.local):
    connection: http.client.HTTPConnection | None = None


class ApiConnections:
    """One keep-alive connection per thread to the API server; build with :meth:`for_client`."""

    def __init__(
        self,
        *,
        origin: str,
        host: str,
        port: int,
        timeouts: Timeouts,
        tls: _Tls | None,
        socket_options: Sequence[SocketOption] = (),
    ) -> None:
        self._origin = origin
        self._host = host
        self._port = port
        self._timeouts = timeouts
        self._tls = tls
        self._socket_options = tuple(socket_options)
        self._slot = _Slot()
        self._lock = threading.Lock()
        self._owners: dict[http.client.HTTPConnection, threading.Thread] = {}

    @classmethod
    def for_client(cls, api_client: k8s.ApiClient, timeouts: Timeouts) -> ApiConnections | None:
        """Connections to ``api_client``'s server, or ``None`` where they would differ."""
        reason = _refusal(api_client)
        if reason is not None:
            logger.debug("API writes stay on the client's pool manager: %s", reason)
            return None
        parts = urlsplit(api_client.configuration.host)
        pool_kw: Mapping[str, Any] = api_client.rest_client.pool_manager.connection_pool_kw
        tls = None
        if parts.scheme == "https":
            tls = _Tls(
                cert_reqs=resolve_cert_reqs(pool_kw.get("cert_reqs")),
                ca_certs=pool_kw.get("ca_certs"),
                ca_cert_data=pool_kw.get("ca_cert_data"),
                cert_file=pool_kw.get("cert_file"),
                key_file=pool_kw.get("key_file"),
            )
            try:
                tls.context()
            except (OSError, ValueError) as exc:
                # The pool manager reports this on each request, as it does today.
                logger.debug("API writes stay on the client's pool manager: TLS: %s", exc)
                return None
        return cls(
            origin=f"{parts.scheme}://{parts.netloc}",
            host=parts.hostname or "",
            port=parts.port or (443 if tls is not None else 80),
            timeouts=timeouts,
            tls=tls,
            socket_options=pool_kw.get("socket_options") or (),
        )

    def target(self, method: str, url: str) -> str | None:
        """The request target for ``url`` when this serves ``method`` there, else ``None``."""
        if method not in SERVED_METHODS or not url.startswith(self._origin):
            return None
        target = url[len(self._origin) :]
        return target if target.startswith("/") else None

    def request(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        """Send on this thread's connection; the status and the whole body of the answer.

        A connection the server closed while idle is replaced without sending on it.
        When one that served before breaks with no answer at all, the request goes once
        more on a fresh connection: that is a keep-alive connection the server closed
        just as the request went out. The request may have been processed then, and the
        writes sent here are safe to repeat: a Binding sent twice gets 409, which the
        bind takes as bound already; an Event is at worst recorded twice; a merge patch
        gives the same object again, or 409 on its resourceVersion, a lost race the
        caller already handles; a Lease create gets 409 AlreadyExists, a lost election.
        """
        slot = self._slot
        connection = slot.connection
        if connection is not None and (
            connection.sock is None or wait_for_read(connection.sock, timeout=0.0)
        ):
            # Closed here, or readable while idle: the server closed it (or misbehaved).
            self._discard(slot)
            connection = None
        if connection is not None:
            answer = self._exchange(slot, connection, method, target, body, headers, fresh=False)
            if answer is not None:
                return answer
        connection = self._open(slot)
        answer = self._exchange(slot, connection, method, target, body, headers, fresh=True)
        assert answer is not None  # a fresh connection's failure raises
        return answer

    def close(self) -> None:
        """Close every thread's connection; later requests open new ones."""
        with self._lock:
            connections = list(self._owners)
            self._owners.clear()
        for connection in connections:
            connection.close()

    # ----- one connection ------------------------------------------------------------

    def _open(self, slot: _Slot) -> http.client.HTTPConnection:
        failure: OSError | None = None
        for _ in range(_CONNECT_ATTEMPTS):
            connection: http.client.HTTPConnection | None = None
            try:
                if self._tls is None:
                    connection = http.client.HTTPConnection(
                        self._host, self._port, timeout=self._timeouts.connect_s
                    )
                else:
                    connection = http.client.HTTPSConnection(
                        self._host,
                        self._port,
                        timeout=self._timeouts.connect_s,
                        context=self._tls.context(),
                    )
                connection.connect()
                sock = connection.sock
                for level, option, value in self._socket_options:
                    sock.setsockopt(level, option, value)
                sock.settimeout(self._timeouts.read_s)
            except OSError as exc:
                if connection is not None:
                    connection.close()
                failure = exc
                continue
            if self._tls is not None and self._tls.cert_reqs == ssl.CERT_NONE:
                # What the pool manager warns on an unverified HTTPS request.
                warnings.warn(
                    f"Unverified HTTPS connection to {self._origin}: the server's certificate "
                    "is not checked (verify_ssl is off)",
                    urllib3.exceptions.InsecureRequestWarning,
                    stacklevel=2,
                )
            self._adopt(slot, connection)
            return connection
        raise ConnectFailed(f"cannot connect to {self._origin}: {failure}") from failure

    def _exchange(
        self,
        slot: _Slot,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        fresh: bool,
    ) -> tuple[int, bytes] | None:
        """The answer, or ``None`` where a reused connection broke before answering."""
        response: http.client.HTTPResponse | None = None
        answered = False
        try:
            connection.request(method, target, body=body, headers=dict(headers))
            response = connection.getresponse()
            answered = True
            data = response.read()
        except BaseException as exc:
            if response is not None:
                response.close()
            self._discard(slot)
            if not fresh and not answered and _no_answer(exc):
                return None
            raise
        if response.will_close:  # ``Connection: close``, or HTTP/1.0
            self._discard(slot)
        return response.status, data

    def _adopt(self, slot: _Slot, connection: http.client.HTTPConnection) -> None:
        """Make ``connection`` this thread's; close those of threads that have ended."""
        with self._lock:
            ended = [c for c, thread in self._owners.items() if not thread.is_alive()]
            for old in ended:
                del self._owners[old]
            self._owners[connection] = threading.current_thread()
        for old in ended:
            old.close()
        slot.connection = connection

    def _discard(self, slot: _Slot) -> None:
        connection, slot.connection = slot.connection, None
        if connection is None:
            return
        with self._lock:
            self._owners.pop(connection, None)
        connection.close()


def _refusal(api_client: k8s.ApiClient) -> str | None:
    """Why the pool manager's requests would differ from these connections', if they would."""
    parts = urlsplit(api_client.configuration.host)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        return f"host: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"host {api_client.configuration.host!r} is not an http(s) URL"
    if parts.username is not None or parts.query or parts.fragment:
        return "the host URL carries credentials, a query or a fragment"
    if not parts.hostname.isascii() or "%" in parts.hostname:
        return "the host name is not plain ASCII"
    if api_client.configuration.debug:
        return "debug is on: http.client prints each request the pool manager sends"
    pool = api_client.rest_client.pool_manager
    if type(pool) is not urllib3.PoolManager:
        return f"requests go through a proxy ({type(pool).__name__})"
    if pool.headers:
        return "the pool manager adds headers of its own"
    unknown = sorted(set(pool.connection_pool_kw) - _MIRRORED)
    if unknown:
        return f"pool settings not mirrored here: {', '.join(unknown)}"
    if parts.scheme == "https" and (ssl_.IS_PYOPENSSL or not ssl_.HAS_NEVER_CHECK_COMMON_NAME):
        return "urllib3 matches host names itself with this ssl module"
    if parts.scheme == "https" and "h2" in ssl_.ALPN_PROTOCOLS:
        return "urllib3 may speak HTTP/2 here"
    return None


def _no_answer(exc: BaseException) -> bool:
    if isinstance(exc, _NO_ANSWER):
        return True
    # A blank line where the status line should be.
    return isinstance(exc, http.client.BadStatusLine) and not "".join(map(str, exc.args)).strip()
