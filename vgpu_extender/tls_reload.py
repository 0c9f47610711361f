"""TLS certificates reloaded when their files change, without a restart.

The webhook fails closed (``failurePolicy: Fail``): with a certificate that has
expired, the API server refuses every GPU pod. cert-manager renews the Secret and the
kubelet updates the mounted files, but uvicorn reads them once, when its
``ssl.SSLContext`` is built (``Config.load()``). :class:`ReloadingServer` is
uvicorn's ``Server`` with a watcher on its event loop that polls the files' stat and,
when they change, loads the new chain into that same live context: new handshakes get
the new certificate, open connections keep theirs. A new pair is first loaded into a
scratch context, so a half-written one (a certificate whose key is not there yet)
leaves the old chain serving; it is tried again when the files next change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl

import uvicorn

from vgpu_extender.redaction import redact_logging

logger = logging.getLogger(__name__)

#: How often the files are looked at; a renewed certificate is served within this.
DEFAULT_INTERVAL_S = 10.0

_Stamp = tuple[tuple[int, int, int], ...]


class CertificateWatcher:
    """Loads ``certfile``/``keyfile`` into ``context`` again whenever either changes."""

    def __init__(
        self,
        context: ssl.SSLContext,
        certfile: str | os.PathLike[str],
        keyfile: str | os.PathLike[str] | None = None,
        *,
        password: str | None = None,
    ) -> None:
        self.context = context
        self.certfile = os.fspath(certfile)
        self.keyfile = os.fspath(keyfile) if keyfile is not None else None
        self._password = password
        self._loaded = self._stamp()
        self._failed: _Stamp | None = None
        #: Pairs loaded since the start, and changed pairs that could not be loaded.
        self.reloads = 0
        self.failures = 0

    def _stamp(self) -> _Stamp:
        """What identifies the files' contents: modification time, size, inode (a
        kubelet-mounted Secret changes by swapping a symlink, so the inode changes)."""
        stamps = []
        for path in (self.certfile, self.keyfile):
            if path is None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                stamps.append((0, 0, 0))
                continue
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def check(self) -> bool:
        """Reload if the files changed since the last load; whether it reloaded."""
        stamp = self._stamp()
        if stamp in (self._loaded, self._failed):
            return False
        try:
            # A scratch context first: a failed load_cert_chain may leave a context
            # with the new certificate and the old key.
            scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            scratch.load_cert_chain(self.certfile, self.keyfile, self._password)
            self.context.load_cert_chain(self.certfile, self.keyfile, self._password)
        except (OSError, ssl.SSLError) as exc:
            self._failed = stamp
            self.failures += 1
            logger.warning(
                "TLS certificate %s changed but cannot be loaded (%s): still serving the "
                "previous one; trying again when the files change",
                self.certfile,
                exc,
            )
            return False
        self._loaded, self._failed = stamp, None
        self.reloads += 1
        logger.info("TLS certificate reloaded from %s", self.certfile)
        return True

    async def watch(self, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        """Check every ``interval_s`` until cancelled (on the event loop that serves
        the context, so no handshake sees it half changed)."""
        while True:
            await asyncio.sleep(interval_s)
            self.check()


class ReloadingServer(uvicorn.Server):
    """``uvicorn.Server`` that reloads its TLS certificate when the files change."""

    def __init__(self, config: uvicorn.Config, *, interval_s: float = DEFAULT_INTERVAL_S):
        super().__init__(config)
        self.interval_s = interval_s
        self.watcher: CertificateWatcher | None = None
        self._watching: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        config = self.config
        if config.ssl is not None and config.ssl_certfile is not None:
            self.watcher = CertificateWatcher(
                config.ssl,
                config.ssl_certfile,
                config.ssl_keyfile,
                password=config.ssl_keyfile_password,
            )
            self._watching = asyncio.create_task(
                self.watcher.watch(self.interval_s), name="tls-certificate-watcher"
            )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._watching is not None:
            self._watching.cancel()
            self._watching = None
        await super().shutdown(sockets=sockets)


def run(
    app: object,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    sockets: list[socket.socket] | None = None,
    **options: object,
) -> None:
    """``uvicorn.run(app, **options)`` on a :class:`ReloadingServer`, on ``sockets``
    when given (bound already, one per listener; else on ``host``/``port``); exits with
    status 3, as uvicorn does, when the server did not start."""
    config = uvicorn.Config(app, **options)  # type: ignore[arg-type]
    # uvicorn's own handlers (set up by Config) print start-up tracebacks: no passwords.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        redact_logging(logging.getLogger(name))
    server = ReloadingServer(config, interval_s=interval_s)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        raise SystemExit(3)
