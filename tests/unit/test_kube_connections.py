"""Which client configurations the keep-alive write connections serve, and the fallback."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s

from vgpu_extender.kube.config import Timeouts
from vgpu_extender.kube.connections import ApiConnections
from vgpu_extender.kube.real import RealKubeClient

HOST = "https://10.0.0.1:6443"


def _configuration(host: str = HOST, **settings: Any) -> k8s.Configuration:
    configuration = k8s.Configuration(host=host)
    configuration.proxy = None  # none from this machine's environment
    for name, value in settings.items():
        setattr(configuration, name, value)
    return configuration


REFUSED = {
    "proxy": {"proxy": "http://proxy.example:3128"},
    "proxy-for-http": {"proxy": "http://proxy.example:3128", "host": "http://10.0.0.1:8080"},
    "tls-server-name": {"tls_server_name": "kubernetes.default.svc"},
    "assert-hostname": {"assert_hostname": False},
    "retries": {"retries": 5},
}
SERVED = {
    "https": {},
    "http": {"host": "http://10.0.0.1:8080"},
    "no-verify": {"verify_ssl": False},
    "keep-alive": {"keep_alive": True},
    "proxy-bypassed": {"proxy": "http://proxy.example:3128", "no_proxy": "10.0.0.0/8"},
}


@pytest.mark.parametrize("settings", REFUSED.values(), ids=REFUSED.keys())
def test_settings_the_connections_do_not_mirror_are_refused(settings: dict[str, Any]) -> None:
    api = k8s.ApiClient(_configuration(**settings))
    assert ApiConnections.for_client(api, Timeouts()) is None


@pytest.mark.parametrize("settings", SERVED.values(), ids=SERVED.keys())
def test_plain_settings_are_served(settings: dict[str, Any]) -> None:
    api = k8s.ApiClient(_configuration(**settings))
    connections = ApiConnections.for_client(api, Timeouts())
    assert connections is not None
    url = api.configuration.host + "/api/v1/namespaces/ns/pods/p/binding"
    assert connections.target("POST", url) == "/api/v1/namespaces/ns/pods/p/binding"
    assert connections.target("PATCH", url) is not None
    # urllib3 retries these on a broken answer or Retry-After: they stay there.
    assert connections.target("GET", url) is None
    assert connections.target("PUT", url) is None
    assert connections.target("POST", "https://elsewhere:6443/api/v1/pods") is None


def test_debug_output_is_left_to_the_pool_manager() -> None:
    configuration = _configuration()
    # ``debug`` switches process-wide settings: put them back afterwards.
    levels = {name: logger.level for name, logger in configuration.logger.items()}
    debuglevel = http.client.HTTPConnection.debuglevel
    configuration.debug = True
    try:
        assert ApiConnections.for_client(k8s.ApiClient(configuration), Timeouts()) is None
    finally:
        http.client.HTTPConnection.debuglevel = debuglevel
        for name, level in levels.items():
            configuration.logger[name].setLevel(level)


def test_an_unreadable_ca_file_is_left_to_the_pool_manager(tmp_path: Any) -> None:
    configuration = _configuration(ssl_ca_cert=str(tmp_path / "missing.crt"))
    assert ApiConnections.for_client(k8s.ApiClient(configuration), Timeouts()) is None


@dataclass
class _PoolAnswer:
    status: int
    data: bytes


@dataclass
class _RecordingPool:
    answer: _PoolAnswer
    calls: list[tuple[str, str]] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> _PoolAnswer:
        self.calls.append((method, url))
        return self.answer


def _client_on_recording_pool(
    configuration: k8s.Configuration, answer: bytes
) -> tuple[RealKubeClient, _RecordingPool]:
    api = k8s.ApiClient(configuration)
    # Short: were the lean path wrongly taken, the test fails fast on an unreachable host.
    kube = RealKubeClient(api, timeouts=Timeouts(connect_s=0.2))
    pool = _RecordingPool(_PoolAnswer(201, answer))
    api.rest_client.pool_manager.request = pool.request  # type: ignore[method-assign,assignment]
    return kube, pool


@pytest.mark.parametrize(
    "settings", [REFUSED["proxy"], REFUSED["tls-server-name"]], ids=["proxy", "tls-server-name"]
)
def test_the_client_falls_back_to_the_pool_manager(settings: dict[str, Any]) -> None:
    kube, pool = _client_on_recording_pool(_configuration(**settings), b'{"kind":"Status"}')
    kube.bind_pod("ns", "p", "uid-1", "node-a")
    assert pool.calls == [("POST", HOST + "/api/v1/namespaces/ns/pods/p/binding")]


def test_reads_and_replacements_stay_on_the_pool_manager() -> None:
    lease = b'{"metadata":{"name":"l","namespace":"ns"}}'
    kube, pool = _client_on_recording_pool(_configuration(), lease)
    kube.get_lease("ns", "l")
    kube.replace_lease("ns", {"metadata": {"name": "l"}})
    base = HOST + "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
    assert pool.calls == [("GET", base), ("PUT", base)]
