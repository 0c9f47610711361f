"""Who may read and change what, and TLS on every endpoint.

Reads (admin API, gpushare inspect, /metrics) need the bearer token when one is
configured, unless open_reads; with none configured they answer loopback clients
only. Every mutating admin call needs the token, and is refused while none is
configured. The probes stay open. TLS is checked on the real command line, with a
certificate made for the test.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    pod_json,
    spawn_tls_demo,
    standalone_settings,
    start_extender,
)
from tests.support.tls import self_signed
from vgpu_extender.api.security import token_matches

TOKEN = "s3cret-Token"
GPU = "GPU-demo-demo-t4-1-0"
MUTATIONS = [
    ("PUT", "/api/v1/inventory", {"nodes": []}),
    ("POST", f"/api/v1/devices/{GPU}/cordon", None),
    ("POST", f"/api/v1/devices/{GPU}/uncordon", None),
]
MUTATION_IDS = ["inventory", "cordon", "uncordon"]
GUARDED_READS = [
    "/api/v1/nodes",
    "/api/v1/nodes/demo-t4-1",
    "/api/v1/summary",
    "/api/v1/allocations",
    "/api/v1/pods/default/nobody",
    "/gpushare-scheduler/inspect",
    "/gpushare-scheduler/inspect/demo-t4-1",
    "/metrics",
]
PROBES = ["/healthz", "/readyz"]
READS = [*GUARDED_READS, *PROBES]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _ids(paths: list[str]) -> list[str]:
    return [p.strip("/").replace("/", "-") for p in paths]


def _answered(response: httpx.Response) -> bool:
    """Served by the endpoint itself (a 404 for an unknown pod counts), not refused."""
    return response.status_code in (200, 404) and "bearer" not in response.text.lower()


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str | None, RunningExtender]]:
    """The demo with a token configured and without one; the tests here change nothing."""
    started: dict[str | None, RunningExtender] = {}
    try:
        for token in (TOKEN, None):
            directory = tmp_path_factory.mktemp("security")
            settings = standalone_settings(directory, demo=True, admin_token=token)
            started[token] = start_extender(settings)
        yield started
    finally:
        for running in started.values():
            running.stop()


@pytest.mark.parametrize("path", GUARDED_READS, ids=_ids(GUARDED_READS))
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": f"Basic {TOKEN}"}, "missing bearer token"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "wrong bearer token"),
    ],
    ids=["no-header", "other-scheme", "wrong-token"],
)
def test_reads_need_the_configured_token(
    servers: dict[str | None, RunningExtender], path: str, headers: dict[str, str], message: str
) -> None:
    response = servers[TOKEN].client.get(path, headers=headers)
    assert response.status_code == 401
    assert message in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("path", GUARDED_READS, ids=_ids(GUARDED_READS))
def test_reads_go_through_with_the_token(
    servers: dict[str | None, RunningExtender], path: str
) -> None:
    assert _answered(servers[TOKEN].client.get(path, headers=AUTH))


@pytest.mark.parametrize("path", READS, ids=_ids(READS))
def test_loopback_reads_need_no_token_while_none_is_configured(
    servers: dict[str | None, RunningExtender], path: str
) -> None:
    assert _answered(servers[None].client.get(path))


@pytest.mark.parametrize("path", PROBES, ids=_ids(PROBES))
def test_probes_need_no_token(servers: dict[str | None, RunningExtender], path: str) -> None:
    assert servers[TOKEN].client.get(path).status_code == 200


def test_open_reads_serves_reads_without_the_token_but_not_changes(
    extender: StartExtender,
) -> None:
    running = extender(demo=True, admin_token=TOKEN, open_reads=True)
    for path in GUARDED_READS:
        assert _answered(running.client.get(path)), path
    response = running.client.post(f"/api/v1/devices/{GPU}/cordon")
    assert response.status_code == 401
    assert running.client.get("/api/v1/nodes/demo-t4-1").json()["cordoned_gpus"] == 0


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS, ids=MUTATION_IDS)
@pytest.mark.parametrize(
    ("configured", "headers", "status", "message"),
    [
        (None, {"Authorization": f"Bearer {TOKEN}"}, 403, "no admin_token is configured"),
        (TOKEN, {}, 401, "missing bearer token"),
        (TOKEN, {"Authorization": f"Basic {TOKEN}"}, 401, "missing bearer token"),
        (TOKEN, {"Authorization": "Bearer s3cret-token"}, 401, "wrong bearer token"),
        (TOKEN, {"Authorization": f"Bearer {TOKEN}x"}, 401, "wrong bearer token"),
    ],
    ids=["no-token-configured", "no-header", "other-scheme", "wrong-case", "longer"],
)
def test_changes_are_refused_without_the_token(
    servers: dict[str | None, RunningExtender],
    method: str,
    path: str,
    body: Any,
    configured: str | None,
    headers: dict[str, str],
    status: int,
    message: str,
) -> None:
    running = servers[configured]
    response = running.client.request(method, path, json=body, headers=headers)
    assert response.status_code == status
    assert message in response.json()["detail"]
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"
    # Nothing changed.
    node = running.client.get("/api/v1/nodes/demo-t4-1", headers=AUTH).json()
    assert node["cordoned_gpus"] == 0
    assert len(running.client.get("/api/v1/nodes", headers=AUTH).json()) == 4


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS[1:], ids=MUTATION_IDS[1:])
def test_changes_go_through_with_the_token(
    extender: StartExtender, method: str, path: str, body: Any
) -> None:
    running = extender(demo=True, admin_token=TOKEN)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    response = running.client.request(method, path, json=body, headers=headers)
    assert response.status_code == 200
    assert response.json()["node"] == "demo-t4-1"


@pytest.mark.parametrize(
    ("given", "expected", "same"),
    [
        ("abc", "abc", True),
        ("abc", "abd", False),
        ("ab", "abc", False),
        ("", "abc", False),
        ("ключ", "ключ", True),
    ],
    ids=["equal", "one-char", "prefix", "empty", "non-ascii"],
)
def test_token_comparison(given: str, expected: str, same: bool) -> None:
    assert token_matches(given, expected) is same


# --------------------------------------------------------------------------- TLS
@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA)."""
    return self_signed(tmp_path_factory.mktemp("tls"), "tls")


def test_every_endpoint_answers_over_tls(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certificate
    process, url = spawn_tls_demo(tmp_path, cert, key, token=TOKEN)
    try:
        with httpx.Client(
            base_url=url, verify=ssl.create_default_context(cafile=cert), timeout=30
        ) as client:
            for path in READS:
                assert _answered(client.get(path, headers=AUTH)), path
            pod = pod_json("p", mem=1000)
            assert client.post("/filter", json=args(pod, ["demo-t4-1"])).json()["NodeNames"] == [
                "demo-t4-1"
            ]
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u1", "operation": "CREATE", "object": pod},
            }
            assert client.post("/webhook", json=review).json()["response"]["allowed"] is True
            cordon = client.post(
                f"/api/v1/devices/{GPU}/cordon", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert cordon.status_code == 200
        with pytest.raises(httpx.HTTPError), httpx.Client(timeout=10) as plain:
            plain.get(f"{process.url}/healthz")  # plain HTTP on the TLS port is refused
    finally:
        process.stop()
