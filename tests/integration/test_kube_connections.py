"""``RealKubeClient``'s keep-alive write connections, over real HTTP and HTTPS."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support.apiserver import FakeApiServer
from tests.support.kube_contract import node, pod
from tests.support.tls import self_signed
from vgpu_extender.kube import objects
from vgpu_extender.kube.errors import AlreadyBound, KubeError, NotFound
from vgpu_extender.kube.real import RealKubeClient

BIND = "/api/v1/namespaces/default/pods/{}/binding"
DEADLINE_S = 10.0


@pytest.fixture
def kube(apiserver: FakeApiServer) -> Iterator[RealKubeClient]:
    """A client whose urllib3 pool manager fails the test if a write reaches it."""
    client = _lean_client(apiserver.configuration())
    try:
        yield client
    finally:
        client.close()


def _lean_client(configuration: k8s.Configuration) -> RealKubeClient:
    api = k8s.ApiClient(configuration)

    def no_pool(*args: Any, **kwargs: Any) -> Any:
        pytest.fail(f"a write went through the pool manager: {args[:2]}")

    api.rest_client.pool_manager.request = no_pool  # type: ignore[method-assign]
    return RealKubeClient(api)


def _add_pods(apiserver: FakeApiServer, *names: str) -> list[str]:
    return [objects.uid(apiserver.add_pod(pod(name))) for name in names]


def _ports(apiserver: FakeApiServer) -> list[int]:
    return [port for _method, _path, port in apiserver.client_ports]


def _wait(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.01)


# --------------------------------------------------------------------------- reuse
def test_writes_share_one_kept_alive_connection(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    apiserver.add_node(node("node-a"))
    uid_a, uid_b = _add_pods(apiserver, "a", "b")
    kube.bind_pod("default", "a", uid_a, "node-a")
    kube.create_event(namespace="default", pod="a", reason="Bound", message="to node-a")
    kube.patch_pod_annotations("default", "b", {"k": "v"})
    kube.patch_node_annotations("node-a", {"k": "v"})
    kube.bind_pod("default", "b", uid_b, "node-a")

    assert [method for method, _path, _port in apiserver.client_ports] == [
        "POST",
        "POST",
        "PATCH",
        "PATCH",
        "POST",
    ]
    assert len(set(_ports(apiserver))) == 1
    assert objects.node_name(apiserver.get_pod("default", "b")) == "node-a"
    assert objects.annotations(apiserver.get_node("node-a")) == {"k": "v"}
    assert [e["reason"] for e in apiserver.events] == ["Bound"]


def test_error_answers_map_as_before_and_keep_the_connection(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    (uid,) = _add_pods(apiserver, "a")
    kube.bind_pod("default", "a", uid, "node-a")
    with pytest.raises(AlreadyBound) as bound:
        kube.bind_pod("default", "a", uid, "node-b")
    assert bound.value.status == 409
    assert "bind pod default/a to node node-b" in str(bound.value)
    with pytest.raises(NotFound):
        kube.patch_pod_annotations("default", "missing", {"k": "v"})
    apiserver.fail_next("POST", r"/binding$", 503, message="overloaded")
    with pytest.raises(KubeError) as unavailable:
        kube.bind_pod("default", "a", uid, "node-a")
    assert unavailable.value.status == 503
    assert "overloaded" in str(unavailable.value)

    assert len(apiserver.client_ports) == 4
    assert len(set(_ports(apiserver))) == 1


# --------------------------------------------------------------------------- stale
def test_a_connection_the_server_closed_while_idle_is_replaced(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    uid_a, uid_b = _add_pods(apiserver, "a", "b")
    apiserver.close_after_next()
    kube.bind_pod("default", "a", uid_a, "node-a")
    _wait(lambda: apiserver.open_connections == 0, "the server closed the connection")

    kube.bind_pod("default", "b", uid_b, "node-a")

    first, second = _ports(apiserver)
    assert first != second
    assert apiserver.dropped == []
    assert [b["metadata"]["name"] for b in apiserver.bindings] == ["a", "b"]


def test_a_reused_connection_that_breaks_unanswered_is_sent_once_more(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    uid_a, uid_b = _add_pods(apiserver, "a", "b")
    kube.bind_pod("default", "a", uid_a, "node-a")
    apiserver.drop_next()

    kube.bind_pod("default", "b", uid_b, "node-a")

    assert apiserver.dropped == [("POST", BIND.format("b"))]
    first, second = _ports(apiserver)
    assert first != second
    assert [b["metadata"]["name"] for b in apiserver.bindings] == ["a", "b"]


def test_a_fresh_connection_that_breaks_is_an_error_not_resent(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    (uid,) = _add_pods(apiserver, "a")
    apiserver.drop_next()
    with pytest.raises(KubeError) as caught:
        kube.bind_pod("default", "a", uid, "node-a")
    assert "bind pod default/a to node node-a" in str(caught.value)
    assert caught.value.status is None
    assert apiserver.dropped == [("POST", BIND.format("a"))]
    assert apiserver.bindings == []

    kube.bind_pod("default", "a", uid, "node-a")  # the next call starts clean
    assert len(apiserver.bindings) == 1


def test_only_one_resend(apiserver: FakeApiServer, kube: RealKubeClient) -> None:
    uid_a, uid_b = _add_pods(apiserver, "a", "b")
    kube.bind_pod("default", "a", uid_a, "node-a")
    apiserver.drop_next(times=3)
    with pytest.raises(KubeError):
        kube.bind_pod("default", "b", uid_b, "node-a")
    assert len(apiserver.dropped) == 2


def test_a_write_after_close_opens_a_new_connection(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    uid_a, uid_b = _add_pods(apiserver, "a", "b")
    kube.bind_pod("default", "a", uid_a, "node-a")
    kube.close()
    _wait(lambda: apiserver.open_connections == 0, "the client closed its connection")
    kube.bind_pod("default", "b", uid_b, "node-a")
    assert len(set(_ports(apiserver))) == 2


# --------------------------------------------------------------------------- threads
def test_each_thread_writes_on_its_own_connection(
    apiserver: FakeApiServer, kube: RealKubeClient
) -> None:
    threads, per_thread = 6, 15
    uids = {
        (t, i): objects.uid(apiserver.add_pod(pod(f"t{t}-{i}")))
        for t in range(threads)
        for i in range(per_thread)
    }
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                kube.bind_pod("default", f"t{t}-{i}", uids[t, i], f"node-{t}")
                kube.create_event(namespace="default", pod=f"t{t}-{i}", reason="R", message="m")
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert failures == []

    assert len(apiserver.bindings) == threads * per_thread
    assert len(apiserver.events) == threads * per_thread
    for (t, i), _uid in uids.items():
        assert objects.node_name(apiserver.get_pod("default", f"t{t}-{i}")) == f"node-{t}"
    ports_of_thread: dict[int, set[int]] = {}
    for _method, path, port in apiserver.client_ports:
        if path.endswith("/binding"):
            t = int(path.split("/")[-2].split("-")[0][1:])
            ports_of_thread.setdefault(t, set()).add(port)
    assert all(len(ports) == 1 for ports in ports_of_thread.values())
    assert len(set.union(*ports_of_thread.values())) == threads


# --------------------------------------------------------------------------- TLS
@dataclass(frozen=True)
class Certificates:
    server: Path
    server_key: Path
    other: Path  # self-signed as well: a wrong CA for the server, or a client certificate
    other_key: Path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("tls")
    return Certificates(*self_signed(directory, "server"), *self_signed(directory, "other"))


def _serving(certificates: Certificates, *, client_ca: Path | None = None) -> FakeApiServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.server, certificates.server_key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return FakeApiServer(ssl_context=context)


@pytest.fixture
def tls_apiserver(certificates: Certificates) -> Iterator[FakeApiServer]:
    with _serving(certificates) as server:
        yield server


def _tls_client(server: FakeApiServer, **settings: Any) -> RealKubeClient:
    configuration = server.configuration()
    for name, value in settings.items():
        setattr(configuration, name, value)
    return _lean_client(configuration)


def test_https_with_the_servers_ca(
    tls_apiserver: FakeApiServer, certificates: Certificates
) -> None:
    assert tls_apiserver.url.startswith("https://")
    uid_a, uid_b = _add_pods(tls_apiserver, "a", "b")
    kube = _tls_client(tls_apiserver, ssl_ca_cert=str(certificates.server))
    try:
        kube.bind_pod("default", "a", uid_a, "node-a")
        kube.create_event(namespace="default", pod="a", reason="Bound", message="m")
        kube.bind_pod("default", "b", uid_b, "node-a")
    finally:
        kube.close()
    assert len(tls_apiserver.bindings) == 2
    assert len(tls_apiserver.events) == 1
    assert len(set(_ports(tls_apiserver))) == 1


def test_https_with_another_ca_fails_on_the_certificate(
    tls_apiserver: FakeApiServer, certificates: Certificates
) -> None:
    (uid,) = _add_pods(tls_apiserver, "a")
    kube = _tls_client(tls_apiserver, ssl_ca_cert=str(certificates.other))
    try:
        with pytest.raises(KubeError) as caught:
            kube.bind_pod("default", "a", uid, "node-a")
    finally:
        kube.close()
    assert "bind pod default/a to node node-a" in str(caught.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert tls_apiserver.bindings == []


def test_https_without_verification(tls_apiserver: FakeApiServer) -> None:
    (uid,) = _add_pods(tls_apiserver, "a")
    kube = _tls_client(tls_apiserver, verify_ssl=False)
    try:
        with pytest.warns(Warning, match="Unverified HTTPS"):
            kube.bind_pod("default", "a", uid, "node-a")
    finally:
        kube.close()
    assert len(tls_apiserver.bindings) == 1


def test_https_with_a_client_certificate(certificates: Certificates) -> None:
    with _serving(certificates, client_ca=certificates.other) as server:
        uid_a, uid_b = _add_pods(server, "a", "b")
        kube = _tls_client(
            server,
            ssl_ca_cert=str(certificates.server),
            cert_file=str(certificates.other),
            key_file=str(certificates.other_key),
        )
        anonymous = _tls_client(server, ssl_ca_cert=str(certificates.server))
        try:
            kube.bind_pod("default", "a", uid_a, "node-a")
            with pytest.raises(KubeError):
                anonymous.bind_pod("default", "b", uid_b, "node-a")
        finally:
            kube.close()
            anonymous.close()
        assert [b["metadata"]["name"] for b in server.bindings] == ["a"]
