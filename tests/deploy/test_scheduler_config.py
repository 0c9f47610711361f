"""The KubeSchedulerConfiguration obeys kube-scheduler's rules and points at the extender."""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy import scheduler_rules
from tests.deploy.app_surface import serves
from tests.deploy.manifests import (
    BASE,
    OVERLAYS,
    container,
    env_values,
    find,
    render,
    scheduler_config,
    volume_for_mount,
)
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

OBJECTS = render(BASE)
CONFIG = scheduler_config(OBJECTS)
EXTENDER = CONFIG["extenders"][0]
DEPLOYMENT = find(OBJECTS, "Deployment", "vgpu-scheduler")


def test_config_passes_kube_schedulers_checks() -> None:
    assert scheduler_rules.check(CONFIG) == []


def _with(change) -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    change(config)
    return config


BROKEN = [
    (lambda c: c.update(apiVersion="kubescheduler.config.k8s.io/v1beta3"), "apiVersion must be"),
    (lambda c: c.update(percentageOfNodeToScore=50), "unknown key 'percentageOfNodeToScore'"),
    (lambda c: c["extenders"][0].update(ignoreable=False), "unknown key 'ignoreable'"),
    (lambda c: c["extenders"][0].update(NodeCacheCapable=True), "unknown key 'NodeCacheCapable'"),
    (lambda c: c["extenders"].append(copy.deepcopy(c["extenders"][0])), "only one extender"),
    (lambda c: c["extenders"][0].update(weight=0), "weight must be positive"),
    (lambda c: c["extenders"][0].update(httpTimeout=30), "httpTimeout must be a duration"),
    (lambda c: c["extenders"][0]["tlsConfig"].update(ca="x"), "unknown key 'ca'"),
    (
        lambda c: c["extenders"][0]["managedResources"].append({"name": "nvidia.com/gpu"}),
        "managed twice",
    ),
    (
        lambda c: c["extenders"][0]["managedResources"].append({"name": "kubernetes.io/gpu"}),
        "no extended resource",
    ),
    (lambda c: c["profiles"].append({"schedulerName": "vgpu-scheduler"}), "duplicate"),
    (lambda c: c["leaderElection"].update(leaseName="x"), "unknown key 'leaseName'"),
]


@pytest.mark.parametrize(
    ("change", "problem"),
    BROKEN,
    ids=[
        "old-api-version",
        "misspelt-top-level-key",
        "hamis-legacy-ignoreable",
        "mis-cased-key",
        "two-binders",
        "zero-weight-with-prioritize",
        "timeout-not-a-duration",
        "unknown-tls-key",
        "resource-managed-twice",
        "kubernetes-io-resource",
        "duplicate-profile",
        "unknown-leader-election-key",
    ],
)
def test_checker_catches(change, problem: str) -> None:
    problems = scheduler_rules.check(_with(change))
    assert any(problem in line for line in problems), problems


def test_extender_uses_every_verb_with_node_names() -> None:
    assert {verb: EXTENDER.get(verb) for verb in scheduler_rules.VERBS} == {
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "bindVerb": "bind",
    }
    assert EXTENDER["nodeCacheCapable"] is True
    assert EXTENDER["ignorable"] is False
    assert EXTENDER["weight"] > 0


def test_http_timeout_leaves_room_for_bind() -> None:
    match = re.fullmatch(r"(\d+)s", EXTENDER["httpTimeout"])
    assert match is not None
    assert 5 <= int(match.group(1)) <= 60


def test_managed_resources_are_the_vendors_and_ignored_by_the_scheduler() -> None:
    managed = EXTENDER["managedResources"]
    assert all(item["ignoredByScheduler"] is True for item in managed)
    assert {item["name"] for item in managed} == set(NvidiaConfig().resource_names) | ASCEND
    assert len(managed) == 5 + 21


#: Every resource of the seven chips of HAMi v2.10's chart: count, -memory and -core.
ASCEND = {
    name
    for chip in DEFAULT_CHIPS
    for name in (chip.resource_name, chip.resource_memory_name, chip.resource_core_name)
}


def test_every_ascend_resource_is_managed_and_ignored_by_the_scheduler() -> None:
    # kube-scheduler's NodeResourcesFit would refuse every node otherwise: the Ascend
    # plugin advertises huawei.com/<CW> only, never -memory or -core (HAMi #1413).
    assert len(ASCEND) == 21
    ignored = {item["name"] for item in EXTENDER["managedResources"] if item["ignoredByScheduler"]}
    assert ignored >= ASCEND
    assert {name for name in ASCEND if name.endswith("-memory")} == {
        f"huawei.com/{cw}-memory"
        for cw in (
            "Ascend910A",
            "Ascend910B2",
            "Ascend910B3",
            "Ascend910B4-1",
            "Ascend910B4",
            "Ascend310P",
            "Ascend910C",
        )
    }


def test_profile_and_leader_election() -> None:
    (profile,) = CONFIG["profiles"]
    extender_env = env_values(container(DEPLOYMENT, "vgpu-extender"))
    assert profile["schedulerName"] == extender_env["VGPU_SCHEDULER_NAME"] == "vgpu-scheduler"
    # GPU resources are ignored by the in-tree filters: score every feasible node.
    assert profile["percentageOfNodesToScore"] == 100
    election = CONFIG["leaderElection"]
    assert election["leaderElect"] is True
    assert election["resourceName"] == profile["schedulerName"]
    assert election["resourceNamespace"] == DEPLOYMENT["metadata"]["namespace"]


def test_url_prefix_is_the_extender_on_loopback() -> None:
    url = urlsplit(EXTENDER["urlPrefix"])
    extender = container(DEPLOYMENT, "vgpu-extender")
    ports = {p["name"]: p["containerPort"] for p in extender["ports"]}
    assert url.hostname == "127.0.0.1"
    assert url.port == ports["verbs"]
    tls = "VGPU_TLS_CERT" in env_values(extender)
    assert (url.scheme == "https") is tls
    assert EXTENDER["enableHTTPS"] is tls


def test_tls_trusts_the_webhook_certificate_by_its_service_name() -> None:
    tls = EXTENDER["tlsConfig"]
    scheduler = container(DEPLOYMENT, "kube-scheduler")
    extender = container(DEPLOYMENT, "vgpu-extender")
    mount = [m for m in scheduler["volumeMounts"] if tls["caFile"].startswith(m["mountPath"] + "/")]
    assert len(mount) == 1, "caFile must be in a mounted volume"
    scheduler_secret = volume_for_mount(DEPLOYMENT, mount[0]["name"])["secret"]["secretName"]
    extender_env = env_values(extender)
    extender_mounts = {m["mountPath"]: m["name"] for m in extender["volumeMounts"]}
    cert_dir = extender_env["VGPU_TLS_CERT"].rsplit("/", 1)[0]
    extender_secret = volume_for_mount(DEPLOYMENT, extender_mounts[cert_dir])["secret"]
    assert scheduler_secret == extender_secret["secretName"]
    service = find(OBJECTS, "Service", "vgpu-extender")
    assert (
        tls["serverName"] == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    )
    certificate = find(render(OVERLAYS / "cert-manager"), "Certificate", "vgpu-extender-tls")
    assert tls["serverName"] in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["secretName"] == scheduler_secret


def test_kube_scheduler_reads_the_config_map() -> None:
    scheduler = container(DEPLOYMENT, "kube-scheduler")
    flag = [a for a in scheduler["command"] if a.startswith("--config=")]
    assert len(flag) == 1
    path = flag[0].split("=", 1)[1]
    directory, _, key = path.rpartition("/")
    mount = [m for m in scheduler["volumeMounts"] if m["mountPath"] == directory]
    assert len(mount) == 1
    config_map = volume_for_mount(DEPLOYMENT, mount[0]["name"])["configMap"]["name"]
    assert key in find(OBJECTS, "ConfigMap", config_map)["data"]


def test_kube_scheduler_image_is_a_current_release() -> None:
    image = container(DEPLOYMENT, "kube-scheduler")["image"]
    match = re.fullmatch(r"registry\.k8s\.io/kube-scheduler:v1\.(\d+)\.(\d+)", image)
    assert match is not None, image
    assert 30 <= int(match.group(1)) <= 39


@pytest.mark.parametrize("verb", scheduler_rules.VERBS)
def test_verbs_are_routes_of_the_app(verb: str) -> None:
    prefix = urlsplit(EXTENDER["urlPrefix"]).path.rstrip("/")
    assert serves("POST", f"{prefix}/{EXTENDER[verb]}")


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/no-such-verb"), ("GET", "/filter")], ids=["unknown", "get"]
)
def test_route_probe_tells_a_missing_route(method: str, path: str) -> None:
    assert not serves(method, path)
