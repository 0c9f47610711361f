"""Who may reach what: the verbs answer loopback clients only by default, and with a
second (admin) or third (metrics) port set, each port serves only its own endpoints.

The extender runs under uvicorn on sockets bound by ``api/listeners.py``, as
``vgpu-extender serve`` runs it, and the clients talk real HTTP to it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.support.server import (
    args,
    free_port,
    pod_json,
    spawn_extender,
    standalone_settings,
)
from vgpu_extender.api import create_app
from vgpu_extender.api.listeners import bind_sockets
from vgpu_extender.settings import Settings

POD = pod_json("web", mem=4000)
FILTER = args(POD, ["demo-t4-1"])


@dataclass
class Served:
    """An extender on the sockets ``bind_sockets`` gave, one URL per listener."""

    server: uvicorn.Server
    thread: threading.Thread
    urls: dict[str, str]

    def client(self, listener: str, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.urls[listener], timeout=30.0, **options)


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start(**overrides: Any) -> Served:
        settings = standalone_settings(tmp_path, demo=True, **overrides)
        bound = bind_sockets(settings)
        config = uvicorn.Config(
            create_app(settings), log_level="warning", lifespan="on", access_log=False
        )
        server = uvicorn.Server(config)
        sockets = [sock for _listener, sock in bound]
        thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
        thread.start()
        while not server.started:
            thread.join(0.01)
            if not thread.is_alive():
                raise RuntimeError("the extender did not start")
        running = Served(server, thread, {listener.name: _url(sock) for listener, sock in bound})
        started.append(running)
        return running

    yield start
    for running in started:
        running.server.should_exit = True
        running.thread.join(30)


def _filtered(client: httpx.Client) -> Any:
    response = client.post("/filter", json=FILTER)
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------ loopback
def _accepted(answer: Any) -> bool:
    return answer["Error"] == "" and answer["NodeNames"] == ["demo-t4-1"]


def test_verbs_answer_loopback_clients_by_default(served: Any) -> None:
    assert Settings().verbs_localhost_only is True
    running = served(host="127.0.0.1", port=0)
    with running.client("main") as client:
        assert _accepted(_filtered(client))
    # Any address of 127.0.0.0/8 is loopback, not only 127.0.0.1.
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with running.client("main", transport=transport) as client:
        assert _accepted(_filtered(client))


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_verbs_answer_an_ipv6_loopback_client(served: Any) -> None:
    running = served(host="::1", port=0)
    assert running.urls["main"].startswith("http://[::1]:")
    with running.client("main") as client:
        assert _accepted(_filtered(client))


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 on this machine")
def test_verbs_answer_an_ipv4_client_seen_through_a_dual_stack_socket(served: Any) -> None:
    """On a socket bound to ``::`` an IPv4 peer shows as ``::ffff:127.0.0.1``."""
    running = served(host="::", port=0)
    port = running.urls["main"].rsplit(":", 1)[1]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
        assert _accepted(_filtered(client))


def _non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("192.0.2.123", 9))
            address: str = sock.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


@pytest.mark.skipif(_non_loopback_address() is None, reason="no non-loopback address here")
def test_verbs_refuse_a_client_off_loopback(served: Any) -> None:
    address = _non_loopback_address()
    running = served(host=address, port=0)
    with running.client("main") as client:
        answer = _filtered(client)
    assert answer["NodeNames"] is None
    assert "loopback clients only" in answer["Error"] and address in answer["Error"]

    opened = served(host=address, port=0, verbs_localhost_only=False)
    with opened.client("main") as client:
        assert _accepted(_filtered(client))


# ------------------------------------------------------------------ ports
def _status(client: httpx.Client, method: str, path: str) -> int:
    body = FILTER if method == "POST" else None
    return client.request(method, path, json=body).status_code


VERB_PATHS = [("POST", "/filter"), ("POST", "/prioritize"), ("POST", "/bind")]
ADMIN_PATHS = [
    ("GET", "/api/v1/summary"),
    ("GET", "/api/v1/nodes"),
    ("GET", "/gpushare-scheduler/inspect"),
    ("GET", "/openapi.json"),
    ("GET", "/ui"),
    ("GET", "/docs"),
]
HEALTH_PATHS = [("GET", "/healthz"), ("GET", "/readyz")]


def test_the_admin_port_serves_admin_and_the_verbs_port_no_longer_does(served: Any) -> None:
    running = served(port=0, admin_port=free_port())
    with running.client("main") as main, running.client("admin") as admin:
        assert _accepted(_filtered(main))
        for method, path in HEALTH_PATHS:
            assert _status(main, method, path) == 200, path
            assert _status(admin, method, path) == 200, path
        for method, path in ADMIN_PATHS:
            assert _status(admin, method, path) == 200, path
            assert _status(main, method, path) == 404, path
        for method, path in VERB_PATHS:
            assert _status(admin, method, path) == 404, path
        # The webhook moves with the admin API.
        assert _status(main, "POST", "/webhook") == 404
        assert _status(admin, "POST", "/webhook") != 404
        # Without a port of its own, /metrics is on the admin port.
        assert _status(admin, "GET", "/metrics") == 200
        assert _status(main, "GET", "/metrics") == 404


def test_metrics_on_their_own_port(served: Any) -> None:
    running = served(port=0, admin_port=free_port(), metrics_port=free_port())
    with (
        running.client("main") as main,
        running.client("admin") as admin,
        running.client("metrics") as metrics,
    ):
        response = metrics.get("/metrics")
        assert response.status_code == 200
        assert "vgpu_extender" in response.text
        assert _status(metrics, "GET", "/healthz") == 200
        assert _status(admin, "GET", "/metrics") == 404
        assert _status(main, "GET", "/metrics") == 404
        for method, path in [*ADMIN_PATHS, *VERB_PATHS]:
            assert _status(metrics, method, path) == 404, path


def test_metrics_port_alone_leaves_everything_else_on_the_main_port(served: Any) -> None:
    running = served(port=0, metrics_port=free_port())
    with running.client("main") as main, running.client("metrics") as metrics:
        assert _accepted(_filtered(main))
        assert _status(main, "GET", "/api/v1/summary") == 200
        assert _status(main, "GET", "/metrics") == 404
        assert _status(metrics, "GET", "/metrics") == 200


def test_two_listeners_cannot_share_a_port() -> None:
    with pytest.raises(ValueError, match=r"admin_port \(8888\) must differ from port"):
        Settings(port=8888, admin_port=8888)
    with pytest.raises(ValueError, match="metrics_port"):
        Settings(admin_port=9000, metrics_port=9000)


def test_serve_listens_on_the_admin_and_metrics_ports(tmp_path: Path) -> None:
    """``vgpu-extender serve`` itself, in its own process."""
    admin_port, metrics_port = free_port(), free_port()
    process = spawn_extender(
        env={
            "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
            "VGPU_ADMIN_PORT": str(admin_port),
            "VGPU_METRICS_PORT": str(metrics_port),
        },
        log=tmp_path / "serve.log",
        args=["--demo"],
    )
    try:
        main = process.client
        admin = httpx.Client(base_url=f"http://127.0.0.1:{admin_port}", timeout=30.0)
        metrics = httpx.Client(base_url=f"http://127.0.0.1:{metrics_port}", timeout=30.0)
        with admin, metrics:
            assert _accepted(_filtered(main))
            assert main.get("/api/v1/summary").status_code == 404
            assert admin.get("/api/v1/summary").status_code == 200
            assert admin.post("/filter", json=FILTER).status_code == 404
            assert metrics.get("/metrics").status_code == 200
            assert metrics.get("/readyz").status_code == 200
        log = (tmp_path / "serve.log").read_text()
        assert f"port {admin_port} (admin)" in log and f"port {metrics_port} (metrics)" in log
    finally:
        process.stop()
