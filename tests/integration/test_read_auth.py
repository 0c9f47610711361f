"""Reads from a client that is not on loopback: refused while no token is configured,
with a message that says how to set one; the probes stay open.

Served for real on this host's own non-loopback address where it has one (the
client's address is then that address, not loopback), and through the app's ASGI
interface with a client address of a documentation network otherwise.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import RunningExtender, serve, standalone_settings
from vgpu_extender.api import create_app
from vgpu_extender.api.security import is_loopback

TOKEN = "read-Token"
GUARDED = [
    "/api/v1/nodes",
    "/api/v1/summary",
    "/api/v1/allocations",
    "/gpushare-scheduler/inspect",
    "/metrics",
]
PROBES = ["/healthz", "/readyz"]
#: TEST-NET-3 (RFC 5737): never a real client, never loopback.
REMOTE = ("203.0.113.9", 40000)


def _own_address() -> str | None:
    """This host's address on its default route, if it has one that is not loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if is_loopback(address) or address == "0.0.0.0" else address


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("fd00::2", False),
        ("", False),
        ("testclient", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _asgi_get(
    tmp_path: Path, path: str, headers: dict[str, str], **settings: object
) -> httpx.Response:
    """One request to the app over its ASGI interface, from ``REMOTE``."""
    app = create_app(standalone_settings(tmp_path, demo=True, **settings))

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=REMOTE)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            return await client.get(path, headers=headers)

    return asyncio.run(get())


@pytest.mark.parametrize("path", GUARDED)
def test_a_remote_read_without_a_configured_token_says_how_to_set_one(
    tmp_path: Path, path: str
) -> None:
    response = _asgi_get(tmp_path, path, {})
    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "loopback clients only" in detail and "VGPU_ADMIN_TOKEN" in detail
    assert "203.0.113.9" in detail


@pytest.mark.parametrize("path", GUARDED)
def test_a_remote_read_needs_the_configured_token(tmp_path: Path, path: str) -> None:
    response = _asgi_get(tmp_path, path, {}, admin_token=TOKEN)
    assert response.status_code == 401
    assert "missing bearer token" in response.json()["detail"]


# --------------------------------------------------------------------------- for real
@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str | None, RunningExtender]]:
    """The demo served on this host's own address, with a token and without one."""
    address = _own_address()
    if address is None:
        pytest.skip("this host has no non-loopback address to serve on")
    started: dict[str | None, RunningExtender] = {}
    try:
        for token in (TOKEN, None):
            directory = tmp_path_factory.mktemp("remote")
            settings = standalone_settings(directory, demo=True, admin_token=token)
            started[token] = serve(create_app(settings), host=address)
        yield started
    finally:
        for running in started.values():
            running.stop()


@pytest.mark.parametrize("path", GUARDED)
def test_reads_over_the_network_are_refused_without_a_configured_token(
    remote: dict[str | None, RunningExtender], path: str
) -> None:
    response = remote[None].client.get(path)
    assert response.status_code == 403
    assert "VGPU_ADMIN_TOKEN" in response.json()["detail"]


@pytest.mark.parametrize("path", GUARDED)
def test_reads_over_the_network_answer_with_the_token(
    remote: dict[str | None, RunningExtender], path: str
) -> None:
    assert remote[TOKEN].client.get(path).status_code == 401
    response = remote[TOKEN].client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


@pytest.mark.parametrize("path", PROBES)
@pytest.mark.parametrize("token", [TOKEN, None], ids=["token-configured", "no-token"])
def test_probes_answer_over_the_network(
    remote: dict[str | None, RunningExtender], token: str | None, path: str
) -> None:
    assert remote[token].client.get(path).status_code == 200


@pytest.mark.parametrize("path", GUARDED)
def test_a_read_through_the_service_proxy_carries_the_token_in_its_own_header(
    remote: dict[str | None, RunningExtender], path: str
) -> None:
    """The API server's service proxy consumes Authorization and passes other headers on."""
    guarded = remote[TOKEN].client
    response = guarded.get(path, headers={"X-Vgpu-Admin-Token": TOKEN})
    assert response.status_code == 200
    response = guarded.get(path, headers={"X-Vgpu-Admin-Token": "not-it"})
    assert response.status_code == 401
    assert response.json()["detail"] == "wrong token in X-Vgpu-Admin-Token"
    # Where Authorization came, it decides: a wrong bearer token is not rescued.
    headers = {"Authorization": "Bearer not-it", "X-Vgpu-Admin-Token": TOKEN}
    assert guarded.get(path, headers=headers).status_code == 401


def test_a_change_needs_the_bearer_token_not_the_proxied_header(
    remote: dict[str | None, RunningExtender],
) -> None:
    guarded = remote[TOKEN].client
    response = guarded.post(
        "/api/v1/devices/GPU-none/cordon", headers={"X-Vgpu-Admin-Token": TOKEN}
    )
    assert response.status_code == 401
    assert "missing bearer token" in response.json()["detail"]
