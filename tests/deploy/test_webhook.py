"""The admission webhook: which pods it sees, how it fails, where its certificate comes from."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import celpy
import pytest

from tests.deploy.manifests import BASE, OVERLAYS, find, render, scheduler_config

OBJECTS = render(BASE)
(HOOK,) = find(OBJECTS, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
(CONDITION,) = HOOK["matchConditions"]


@cache
def _program() -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(CONDITION["expression"]))


def _matches(pod: dict[str, Any]) -> bool:
    return bool(_program().evaluate({"object": celpy.json_to_cel(pod)}))


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _ctr(limits: dict[str, str] | None = None, requests: dict[str, str] | None = None) -> dict:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": "c", "image": "busybox", "resources": resources}


CASES = [
    (_pod([_ctr({"nvidia.com/gpu": "1"})]), True),
    (_pod([_ctr(requests={"nvidia.com/gpumem": "3000"})]), True),
    (_pod([_ctr({"nvidia.com/gpumem-percentage": "50"})]), True),
    (_pod([_ctr({"cpu": "1"}), _ctr({"nvidia.com/gpucores": "30"})]), True),
    (_pod([_ctr({"nvidia.com/priority": "0"})]), True),
    (_pod([_ctr({"cpu": "1"})], init=[_ctr({"nvidia.com/gpu": "1"})]), True),
    (_pod([_ctr({"cpu": "1", "memory": "1Gi"})]), False),
    (_pod([{"name": "c", "image": "busybox"}]), False),
    (_pod([_ctr({"example.com/gpu": "1"})]), False),
    (_pod([_ctr({"cpu": "1"})], init=[_ctr({"cpu": "1"})]), False),
]


@pytest.mark.parametrize(
    ("pod", "expected"),
    CASES,
    ids=[
        "gpu-limit",
        "gpumem-request",
        "percentage",
        "second-container",
        "priority-only",
        "init-container",
        "cpu-only",
        "no-resources",
        "other-vendor",
        "init-without-gpu",
    ],
)
def test_match_condition_selects_gpu_pods(pod: dict, expected: bool) -> None:
    assert _matches(pod) is expected


def test_match_condition_names_the_managed_gpu_resources() -> None:
    # The base extender serves NVIDIA: only GPU pods depend on the webhook being up
    # (components/ascend adds the Ascend names, tests/deploy/test_ascend_component.py).
    managed = {m["name"] for m in scheduler_config(OBJECTS)["extenders"][0]["managedResources"]}
    gpu = {name for name in managed if name.startswith("nvidia.com/")}
    lists = re.findall(r"\[([^\]]*)\]", CONDITION["expression"])
    assert lists
    for literal in lists:
        assert {item.strip().strip("'") for item in literal.split(",")} == gpu


def test_failure_policy_and_admission_versions() -> None:
    assert HOOK["failurePolicy"] == "Fail"
    assert HOOK["sideEffects"] == "None"
    assert "v1" in HOOK["admissionReviewVersions"]
    assert HOOK["timeoutSeconds"] <= 10
    assert HOOK["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]


def test_hamis_opt_out_label_and_own_namespace_are_skipped() -> None:
    ignore = {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}
    assert ignore in HOOK["objectSelector"]["matchExpressions"]
    assert ignore in HOOK["namespaceSelector"]["matchExpressions"]
    names = [
        e
        for e in HOOK["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    ]
    service_namespace = HOOK["clientConfig"]["service"]["namespace"]
    assert service_namespace in names[0]["values"] and "kube-system" in names[0]["values"]


@pytest.mark.parametrize(
    ("kind", "name"), [("Deployment", "vgpu-scheduler"), ("DaemonSet", "vgpu-device-plugin")]
)
def test_own_pods_are_labelled_out_of_the_webhook(kind: str, name: str) -> None:
    labels = find(OBJECTS, kind, name)["spec"]["template"]["metadata"]["labels"]
    assert labels["hami.io/webhook"] == "ignore"


def test_base_expects_a_provided_secret_and_no_ca_injection() -> None:
    config = find(OBJECTS, "MutatingWebhookConfiguration", "vgpu-extender")
    assert "cert-manager.io/inject-ca-from" not in (config["metadata"].get("annotations") or {})


def test_cert_manager_injects_the_ca_of_the_serving_certificate() -> None:
    objects = render(OVERLAYS / "cert-manager")
    config = find(objects, "MutatingWebhookConfiguration", "vgpu-extender")
    namespace, _, name = config["metadata"]["annotations"][
        "cert-manager.io/inject-ca-from"
    ].partition("/")
    certificate = find(objects, "Certificate", name)
    assert certificate["metadata"]["namespace"] == namespace
    service = HOOK["clientConfig"]["service"]
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
    issuer = find(
        objects, certificate["spec"]["issuerRef"]["kind"], certificate["spec"]["issuerRef"]["name"]
    )
    ca = find(objects, "Certificate", issuer["spec"]["ca"]["secretName"])
    assert ca["spec"]["isCA"] is True
