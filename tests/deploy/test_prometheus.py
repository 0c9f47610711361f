"""The ServiceMonitor scrapes the extender's /metrics as the extender requires: over
TLS to the name its certificate carries, with the admin token as bearer token; the
PrometheusRule beside it is checked in test_prometheus_rules.py."""

from __future__ import annotations

import json
import re

from tests.deploy.manifests import (
    BASE,
    COMPONENTS,
    DEPLOY,
    KUSTOMIZATION,
    OVERLAYS,
    container,
    find,
    load_documents,
    render,
)

BASE_OBJECTS = render(BASE)
COMPONENT = COMPONENTS / "prometheus"
(MONITOR,) = [d for d in load_documents(COMPONENT / "service-monitor.yaml")]
(ENDPOINT,) = MONITOR["spec"]["endpoints"]


def test_the_component_lists_the_service_monitor_and_the_rules() -> None:
    (spec,) = load_documents(COMPONENT / KUSTOMIZATION)
    assert spec["kind"] == "Component"
    assert spec["resources"] == ["service-monitor.yaml", "prometheus-rule.yaml", "pod-monitor.yaml"]


def test_the_pod_monitor_scrapes_the_node_agents_metrics_port() -> None:
    (monitor,) = load_documents(COMPONENT / "pod-monitor.yaml")
    agent = find(BASE_OBJECTS, "DaemonSet", "vgpu-device-plugin")
    assert monitor["metadata"]["namespace"] == agent["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"] == agent["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (agent_container,) = agent["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in agent_container["ports"]}
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    probes = agent_container["readinessProbe"]["httpGet"]
    assert probes["port"] in (endpoint["port"], ports[endpoint["port"]])


def test_the_rules_live_beside_the_service_monitor() -> None:
    (rule,) = load_documents(COMPONENT / "prometheus-rule.yaml")
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == MONITOR["metadata"]["namespace"]
    assert rule["metadata"]["labels"] == MONITOR["metadata"]["labels"]


def test_it_selects_the_extenders_service_and_port() -> None:
    service = find(BASE_OBJECTS, "Service", "vgpu-extender")
    assert MONITOR["metadata"]["namespace"] == service["metadata"]["namespace"]
    labels = service["metadata"]["labels"]
    assert MONITOR["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert ENDPOINT["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (ENDPOINT["path"], ENDPOINT["scheme"]) == ("/metrics", "https")


def test_it_sends_the_admin_token_the_extender_reads() -> None:
    extender = container(find(BASE_OBJECTS, "Deployment", "vgpu-scheduler"), "vgpu-extender")
    (token,) = [e for e in extender["env"] if e["name"] == "VGPU_ADMIN_TOKEN"]
    reference = token["valueFrom"]["secretKeyRef"]
    credentials = ENDPOINT["authorization"]["credentials"]
    assert ENDPOINT["authorization"]["type"] == "Bearer"
    assert (credentials["name"], credentials["key"]) == (reference["name"], reference["key"])


def test_it_trusts_the_serving_certificate_by_its_name() -> None:
    tls = ENDPOINT["tlsConfig"]
    objects = render(OVERLAYS / "cert-manager")
    certificate = find(objects, "Certificate", tls["ca"]["secret"]["name"])
    assert tls["serverName"] in certificate["spec"]["dnsNames"]
    assert tls["ca"]["secret"]["key"] == "ca.crt"


def test_the_dashboard_draws_allocation_from_hamis_metric_names() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "vgpu-extender-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\b(hami_\w+)", expr)}
    # HAMi's scheduler's allocation gauges (../shared/spec/hami.md section 7).
    assert used >= {
        "hami_gpu_memory_limit_bytes",
        "hami_gpu_memory_allocated_bytes",
        "hami_gpu_core_limit_ratio",
        "hami_gpu_core_allocated_ratio",
        "hami_gpu_shared_count",
        "hami_node_gpu_memory_allocated_ratio",
        "hami_vgpu_memory_allocated_bytes",
        "hami_vgpu_core_allocated_ratio",
    }
    # Per node and per GPU, whichever replica's copy Prometheus holds.
    assert any("sum by (node)" in expr for expr in exprs)
    assert any("max by (node, device_uuid, device_index)" in expr for expr in exprs)
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "job", "node"}
