"""A real Prometheus scrapes a running extender as deploy.md says (HTTPS, the admin
token as bearer token from a file, the serving certificate's CA), loads the alert rules,
and every expression of the rules and of the Grafana dashboard returns series.

The extender runs in its own process against the test API server, with two nodes, a
pod it bound, a pod that fits nowhere and a bind that fails, so every family has
samples. Prometheus scrapes every second; the queries run once it holds a few scrapes,
so ``rate()`` over the rules' and the dashboard's windows has two samples or more.
"""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.test_prometheus_rules import signal
from tests.support.apiserver_process import ApiServerProcess
from tests.support.server import (
    ExtenderProcess,
    args,
    bind_args,
    free_port,
    node_json,
    pod_json,
    spawn_extender,
    write_kubeconfig,
)
from tests.support.tls import self_signed

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "vgpu-extender-dashboard.json"
JOB = "vgpu-extender"
#: Scrapes held before the queries run: two give every rate() a value, a few spare.
SCRAPES = 4
DEADLINE_S = 45.0
#: The dashboard's variables as "All" selects them, and Grafana's rate window.
VARIABLES = {"$__rate_interval": "1m", "$job": ".+", "$node": ".+"}


@dataclass(frozen=True)
class Prometheus:
    url: str
    client: httpx.Client

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = self.client.get(f"{self.url}/api/v1/query", params={"query": expr})
        body = response.json()
        assert response.status_code == 200 and body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def api(self, path: str) -> Any:
        response = self.client.get(f"{self.url}/api/v1/{path}")
        assert response.status_code == 200, response.text
        return response.json()["data"]


def _wait(check: Any, what: str, *, tick: Any = None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        if tick is not None:
            tick()
        time.sleep(0.2)


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            exprs.append(expr)
    return exprs


def _rule_exprs() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


@pytest.fixture
def binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("the prometheus server is not installed (Debian: apt-get install prometheus)")
    return found


@dataclass(frozen=True)
class Scraped:
    """The extender under test, how to reach it, and what Prometheus needs to."""

    process: ExtenderProcess
    traffic: Traffic
    cert: Path
    token: str = field(repr=False)  # never in a failure's output


class Traffic:
    """kube-scheduler's calls, over HTTPS, to the extender under test."""

    def __init__(self, extender: ExtenderProcess, cert: Path) -> None:
        self.client = httpx.Client(
            base_url=extender.url.replace("http://", "https://"),
            verify=ssl.create_default_context(cafile=str(cert)),
        )
        self.process = extender

    def post(self, path: str, body: Any) -> Any:
        response = self.client.post(path, json=body)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    def wait_serving(self) -> None:
        """Until the extender is ready: answering over HTTPS, its first sync with the API
        server done (until then the verbs place nothing)."""

        def serving() -> bool:
            assert self.process.process.poll() is None, self.process.log.read_text()
            try:
                return self.client.get("/readyz").status_code == 200
            except httpx.TransportError:
                return False

        _wait(serving, "the extender is ready over HTTPS")

    def filter_again(self) -> None:
        self.post("/filter", args(pod_json("probe", mem=1000), ["n1", "n2"]))


@pytest.fixture
def extender(tmp_path: Path) -> Iterator[Scraped]:
    cert, key = self_signed(tmp_path, "extender")
    token = secrets.token_urlsafe(24)
    placed = pod_json("placed", mem=2000, cores=20)
    with ApiServerProcess.start(nodes=[node_json("n1"), node_json("n2")], pods=[placed]) as api:
        process = spawn_extender(
            env={
                "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'extender.db'}",
                "VGPU_KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.url)),
                "VGPU_ADMIN_TOKEN": token,
                "VGPU_TLS_CERT": str(cert),
                "VGPU_TLS_KEY": str(key),
            },
            log=tmp_path / "extender.log",
            wait=False,
        )
        traffic = Traffic(process, cert)
        try:
            traffic.wait_serving()
            nodes = ["n1", "n2"]
            traffic.post("/filter", args(placed, nodes))
            assert traffic.post("/bind", bind_args(placed, "n1")) == {"Error": ""}
            traffic.post("/filter", args(pod_json("huge", mem=100_000), nodes))
            assert traffic.post("/bind", bind_args(pod_json("lost", mem=1000), "n2"))["Error"]
            yield Scraped(process, traffic, cert, token)
        finally:
            traffic.client.close()
            process.stop()


def _config(tmp_path: Path, target: str, cert: Path, token: str) -> Path:
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    tls = {"ca_file": str(cert), "server_name": "127.0.0.1"}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": JOB,
                "scheme": "https",
                "metrics_path": "/metrics",
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "tls_config": tls,
                "static_configs": [{"targets": [target]}],
            },
            # The same target without the token: the extender must refuse it.
            {
                "job_name": "no-token",
                "scheme": "https",
                "tls_config": tls,
                "static_configs": [{"targets": [target]}],
            },
        ],
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def prometheus(binary: str, tmp_path: Path, extender: Scraped) -> Iterator[Prometheus]:
    target = extender.process.url.removeprefix("http://")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={_config(tmp_path, target, extender.cert, extender.token)}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = httpx.Client(timeout=10.0)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert server.poll() is None, (tmp_path / "prometheus.log").read_text()
        try:
            return client.get(f"{url}/-/ready").status_code == 200
        except httpx.TransportError:
            return False

    try:
        _wait(ready, "Prometheus ready")
        yield Prometheus(url, client)
    finally:
        client.close()
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _targets(prometheus: Prometheus) -> dict[str, dict[str, Any]]:
    active = prometheus.api("targets")["activeTargets"]
    return {t["labels"]["job"]: t for t in active}


def test_every_rule_and_panel_returns_series_from_a_scraped_extender(
    prometheus: Prometheus, extender: Scraped
) -> None:
    traffic = extender.traffic
    _wait(
        lambda: _targets(prometheus).get(JOB, {}).get("health") == "up",
        "the extender's target up",
    )
    held = f'count_over_time(vgpu_extender_build_info{{job="{JOB}"}}[1m])'

    def enough() -> bool:
        result = prometheus.query(held)
        return bool(result) and float(result[0]["value"][1]) >= SCRAPES

    # Filters between the scrapes, so the latency rates have something to show.
    _wait(enough, f"{SCRAPES} scrapes held", tick=traffic.filter_again)

    refused = _targets(prometheus)["no-token"]
    assert refused["health"] == "down"
    assert "401" in refused["lastError"]

    empty = []
    for alert, expr in _rule_exprs():
        prometheus.query(expr)  # the whole expression evaluates
        if not prometheus.query(signal(expr)):
            empty.append(f"rule {alert}: {signal(expr)}")
    for expr in _dashboard_exprs():
        if not prometheus.query(expr):
            empty.append(f"panel: {expr}")
    assert not empty, "no series:\n" + "\n".join(empty)


def test_prometheus_loads_and_evaluates_every_rule(prometheus: Prometheus) -> None:
    names = {alert for alert, _ in _rule_exprs()}

    def evaluated() -> bool:
        groups = prometheus.api("rules")["groups"]
        health = {rule["name"]: rule["health"] for g in groups for rule in g["rules"]}
        return set(health) == names and all(h == "ok" for h in health.values())

    _wait(evaluated, "every rule loaded and evaluated without error")
