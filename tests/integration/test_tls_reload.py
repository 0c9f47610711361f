"""TLS certificates replaced on disk are served to new connections without a restart.

A real uvicorn over TLS (the extender's app, on a ``ReloadingServer``), and the real
command line; each new handshake's certificate is compared with the files'.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.support.server import spawn_extender, standalone_settings
from tests.support.tls import self_signed
from tests.support.waiting import eventually
from vgpu_extender.api import create_app
from vgpu_extender.tls_reload import ReloadingServer

INTERVAL_S = 0.05


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two distinct certificates for 127.0.0.1 (each its own CA), made once."""
    directory = tmp_path_factory.mktemp("pairs")
    return {name: self_signed(directory, name) for name in ("old", "new")}


def _der(cert: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


def _served(port: int) -> bytes:
    """The certificate a new TLS connection to ``port`` is given."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def _install(source: tuple[Path, Path], cert: Path, key: Path, *, only: str = "") -> None:
    """Write a pair over the served files the way a tool does: each replaced whole."""
    for src, dst, part in ((source[0], cert, "cert"), (source[1], key, "key")):
        if only and part != only:
            continue
        scratch = dst.with_suffix(".tmp")
        shutil.copyfile(src, scratch)
        os.replace(scratch, dst)


class Served:
    def __init__(self, server: ReloadingServer, thread: threading.Thread) -> None:
        self.server = server
        self.thread = thread
        self.port: int = server.servers[0].sockets[0].getsockname()[1]


@pytest.fixture
def served(
    pairs: dict[str, tuple[Path, Path]], tmp_path: Path
) -> Iterator[tuple[Served, Path, Path]]:
    """The extender over TLS on the 'old' pair, from files the test may replace."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(pairs["old"], cert, key)
    config = uvicorn.Config(
        create_app(standalone_settings(tmp_path, demo=True)),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = ReloadingServer(config, interval_s=INTERVAL_S)
    thread = threading.Thread(target=server.run, name="tls-under-test", daemon=True)
    thread.start()
    eventually(lambda: server.started or not thread.is_alive(), "the server started")
    assert server.started
    try:
        yield Served(server, thread), cert, key
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_new_connection_gets_the_replaced_certificate(
    served: tuple[Served, Path, Path], pairs: dict[str, tuple[Path, Path]]
) -> None:
    running, cert, key = served
    assert _served(running.port) == _der(pairs["old"][0])
    _install(pairs["new"], cert, key)
    eventually(lambda: _served(running.port) == _der(pairs["new"][0]), "the new certificate")
    # And the server answers over it, verified against the new certificate.
    verify = ssl.create_default_context(cafile=pairs["new"][0])
    with httpx.Client(verify=verify, timeout=10) as client:
        assert client.get(f"https://127.0.0.1:{running.port}/healthz").status_code == 200


def test_a_half_replaced_pair_keeps_the_old_certificate_until_it_is_whole(
    served: tuple[Served, Path, Path], pairs: dict[str, tuple[Path, Path]]
) -> None:
    running, cert, key = served
    watcher = running.server.watcher
    assert watcher is not None
    _install(pairs["new"], cert, key, only="cert")  # the new certificate, the old key
    eventually(lambda: watcher.failures == 1, "the mismatched pair tried")
    assert _served(running.port) == _der(pairs["old"][0])
    _install(pairs["new"], cert, key, only="key")
    eventually(lambda: _served(running.port) == _der(pairs["new"][0]), "the whole new pair")
    assert watcher.reloads == 1


def test_a_secret_volume_swap_is_seen(pairs: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """As the kubelet updates a mounted Secret: the files are links through ``..data``,
    a link to a directory of the current contents, swapped in one rename."""
    volume = tmp_path / "volume"
    volume.mkdir()

    def publish(name: str) -> None:
        contents = volume / f"..{name}"
        contents.mkdir()
        shutil.copyfile(pairs[name][0], contents / "tls.crt")
        shutil.copyfile(pairs[name][1], contents / "tls.key")
        link = volume / "..data_tmp"
        link.symlink_to(contents.name)
        os.replace(link, volume / "..data")

    publish("old")
    for file in ("tls.crt", "tls.key"):
        (volume / file).symlink_to(f"..data/{file}")
    config = uvicorn.Config(
        create_app(standalone_settings(tmp_path, demo=True)),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        ssl_certfile=str(volume / "tls.crt"),
        ssl_keyfile=str(volume / "tls.key"),
    )
    server = ReloadingServer(config, interval_s=INTERVAL_S)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started, "the server started")
        port = server.servers[0].sockets[0].getsockname()[1]
        assert _served(port) == _der(pairs["old"][0])
        publish("new")
        eventually(lambda: _served(port) == _der(pairs["new"][0]), "the swapped certificate")
    finally:
        server.should_exit = True
        thread.join(30)


def test_the_command_line_serves_a_renewed_certificate(
    pairs: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(pairs["old"], cert, key)
    process = spawn_extender(
        env={
            "VGPU_TLS_CERT": str(cert),
            "VGPU_TLS_KEY": str(key),
            "VGPU_TLS_RELOAD_INTERVAL_S": str(INTERVAL_S),
            "VGPU_DEMO": "true",
            "VGPU_KUBE_MODE": "off",
            "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'tls.db'}",
        },
        log=tmp_path / "extender.log",
        wait=False,
    )
    port = int(process.url.rsplit(":", 1)[1])

    def serves(name: str) -> bool:
        try:
            return _served(port) == _der(pairs[name][0])
        except OSError:
            assert process.process.poll() is None, (tmp_path / "extender.log").read_text()
            return False

    try:
        eventually(lambda: serves("old"), "the extender served over TLS")
        _install(pairs["new"], cert, key)
        eventually(lambda: serves("new"), "the renewed certificate served")
        assert "TLS certificate reloaded" in (tmp_path / "extender.log").read_text()
    finally:
        process.stop()
