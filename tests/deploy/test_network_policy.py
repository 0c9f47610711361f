"""Who may reach the extender's Pod: the API server on the webhook's port, Prometheus,
and nothing else from outside the Pod (kube-scheduler calls it over loopback)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import DEPLOY, buildable_dirs, find, pod_spec, render

BUILDABLE = buildable_dirs()
PROMETHEUS = {
    "namespace": {"kubernetes.io/metadata.name": "monitoring"},
    "pod": {"app.kubernetes.io/name": "prometheus"},
}
SOME_POD = {"namespace": {"kubernetes.io/metadata.name": "default"}, "pod": {"app": "curl"}}
#: An address outside the cluster's Pods (the API server's, or anyone's).
OUTSIDE = {"ip": "192.0.2.10"}


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    wanted = (selector or {}).get("matchLabels") or {}
    assert not (selector or {}).get("matchExpressions"), "only matchLabels are modelled"
    return all(labels.get(k) == v for k, v in wanted.items())


def _peer_matches(peer: dict[str, Any], source: dict[str, Any]) -> bool:
    if "ipBlock" in peer:
        return False  # deploy/ uses none; an ipBlock narrowing would be checked here
    if "pod" not in source:
        return False  # not a Pod: only an ipBlock (or no `from`) admits it
    namespace_ok = "namespaceSelector" not in peer or _selects(
        peer["namespaceSelector"], source["namespace"]
    )
    pod_ok = "podSelector" not in peer or _selects(peer["podSelector"], source["pod"])
    return namespace_ok and pod_ok


def admits(
    objects: list[dict[str, Any]], pod_labels: dict[str, str], port: str, source: dict
) -> bool:
    """Whether the rendered NetworkPolicies let ``source`` reach ``port`` of the Pod."""
    policies = [
        p
        for p in objects
        if p["kind"] == "NetworkPolicy"
        and "Ingress" in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], pod_labels)
    ]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            port_ok = ports is None or any(p["port"] == port for p in ports)
            peers = rule.get("from")
            peer_ok = peers is None or any(_peer_matches(peer, source) for peer in peers)
            if port_ok and peer_ok:
                return True
    return False


def _scheduler(objects: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, int]]:
    deployment = find(objects, "Deployment", "vgpu-scheduler")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    ports = {
        p["name"]: p["containerPort"]
        for c in (pod_spec(deployment) or {})["containers"]
        for p in c.get("ports") or []
    }
    return labels, ports


def _webhook_port(objects: list[dict[str, Any]]) -> str:
    (service_port,) = find(objects, "Service", "vgpu-extender")["spec"]["ports"]
    target: str = service_port["targetPort"]
    return target


@pytest.mark.parametrize("directory", BUILDABLE, ids=lambda d: str(d.relative_to(DEPLOY)))
def test_the_api_server_reaches_the_webhook(directory: Any) -> None:
    objects = render(directory)
    labels, ports = _scheduler(objects)
    webhook = _webhook_port(objects)
    assert webhook in ports
    assert admits(objects, labels, webhook, OUTSIDE)


@pytest.mark.parametrize("directory", BUILDABLE, ids=lambda d: str(d.relative_to(DEPLOY)))
def test_only_prometheus_and_the_webhook_get_in(directory: Any) -> None:
    objects = render(directory)
    labels, ports = _scheduler(objects)
    webhook = _webhook_port(objects)
    metrics = "metrics" if "metrics" in ports else webhook
    assert admits(objects, labels, metrics, PROMETHEUS)
    for name in ports:
        if name != webhook:
            # kube-scheduler's own port, a verbs-only port: no one from outside the Pod.
            assert not admits(objects, labels, name, OUTSIDE), name
            assert not admits(objects, labels, name, SOME_POD), name
    if metrics != webhook:
        assert not admits(objects, labels, metrics, SOME_POD)


def test_every_port_a_policy_names_is_a_port_of_its_pods() -> None:
    objects = render(BUILDABLE[0])
    _labels, ports = _scheduler(objects)
    policy = find(objects, "NetworkPolicy", "vgpu-scheduler")
    named = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert named and named <= set(ports)


def test_only_prometheus_reaches_the_node_agent_and_only_its_metrics() -> None:
    objects = render(BUILDABLE[0])
    daemon = find(objects, "DaemonSet", "vgpu-device-plugin")
    labels = daemon["spec"]["template"]["metadata"]["labels"]
    assert not (pod_spec(daemon) or {}).get("hostNetwork")
    ports = {p["name"] for c in pod_spec(daemon)["containers"] for p in c.get("ports") or []}
    assert ports == {"metrics"}
    assert admits(objects, labels, "metrics", PROMETHEUS)
    for source in (OUTSIDE, SOME_POD):
        assert not admits(objects, labels, "metrics", source)
    assert not admits(objects, labels, "any", PROMETHEUS)
