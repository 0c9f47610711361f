"""components/ascend: the extender serves NVIDIA and Ascend, the webhook sees the pods
that ask for an Ascend resource, and the Ascend node agent runs on the nodes HAMi's
chart labels ``ascend=on``; everything else is base's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel

from tests.deploy.env_expansion import expanded_env
from tests.deploy.manifests import (
    BASE,
    COMPONENTS,
    container,
    find,
    normalised,
    object_key,
    pod_spec,
    render,
    scheduler_config,
)
from vgpu_extender.settings import Settings
from vgpu_extender.vendors import create_vendor_set

COMPONENT = COMPONENTS / "ascend"


@cache
def _overlay_dir() -> Path:
    """An overlay of base with the component, as a user writes one."""
    directory = Path(tempfile.mkdtemp(prefix="ascend-overlay-"))
    (directory / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(BASE, directory)],
                "components": [os.path.relpath(COMPONENT, directory)],
            }
        ),
        encoding="utf-8",
    )
    return directory


@cache
def _objects() -> list[dict[str, Any]]:
    return render(_overlay_dir())


def test_the_component_is_a_component() -> None:
    spec = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text(encoding="utf-8"))
    assert spec["kind"] == "Component"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
def test_render_matches_kubectl_kustomize() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(_overlay_dir())],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    theirs = [doc for doc in yaml.safe_load_all(built) if doc]
    assert normalised(_objects()) == normalised(theirs)


def test_everything_of_base_stays_and_the_agent_is_added() -> None:
    base = {object_key(o) for o in render(BASE)}
    ours = {object_key(o) for o in _objects()}
    assert base <= ours
    assert {key[1:] for key in ours - base} == {
        ("DaemonSet", "vgpu-system", "vgpu-device-plugin-ascend"),
        ("NetworkPolicy", "vgpu-system", "vgpu-device-plugin-ascend"),
    }


def test_the_extender_serves_nvidia_and_every_ascend_chip() -> None:
    deployment = find(_objects(), "Deployment", "vgpu-scheduler")
    vendor = expanded_env(container(deployment, "vgpu-extender"))["VGPU_VENDOR"]
    assert vendor == "nvidia,ascend"
    vendors = create_vendor_set(vendor, Settings(vendor=vendor).vendor_config)
    managed = {m["name"] for m in scheduler_config(_objects())["extenders"][0]["managedResources"]}
    # Every resource the vendors serve is managed by the extender, and nothing more.
    assert vendors.resource_names == managed
    assert len(vendors.members) == 1 + 7


def _condition() -> str:
    (hook,) = find(_objects(), "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    (condition,) = hook["matchConditions"]
    assert condition["name"] == "requests-a-gpu-resource"
    expression: str = condition["expression"]
    return expression


def _matches(pod: dict[str, Any]) -> bool:
    environment = celpy.Environment()
    program = environment.program(environment.compile(_condition()))
    return bool(program.evaluate({"object": json_to_cel(pod)}))


def _pod(limits: dict[str, str], *, init: bool = False, requests: bool = False) -> dict[str, Any]:
    resources = {"requests" if requests else "limits": limits}
    containers = [{"name": "c", "image": "x", "resources": resources}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    spec["initContainers" if init else "containers"] = containers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_the_webhook_condition_names_every_managed_resource() -> None:
    managed = {m["name"] for m in scheduler_config(_objects())["extenders"][0]["managedResources"]}
    lists = re.findall(r"\[([^\]]*)\]", _condition())
    assert len(lists) == 4
    for literal in lists:
        assert {item.strip().strip("'") for item in literal.split(",")} == managed


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod({"huawei.com/Ascend910B3": "1"}), True),
        (_pod({"huawei.com/Ascend310P-memory": "3000"}, requests=True), True),
        (_pod({"huawei.com/Ascend910C": "2"}, init=True), True),
        (_pod({"nvidia.com/gpu": "1"}), True),
        (_pod({"huawei.com/Ascend910": "1"}), False),  # no chip of the table
        (_pod({"cpu": "1"}), False),
    ],
    ids=["npu-limit", "memory-request", "init-container", "gpu", "unknown-chip", "cpu-only"],
)
def test_the_webhook_sees_npu_pods(pod: dict[str, Any], expected: bool) -> None:
    assert _matches(pod) is expected


def _agent() -> dict[str, Any]:
    return find(_objects(), "DaemonSet", "vgpu-device-plugin-ascend")


def test_the_agent_runs_on_hamis_ascend_nodes_apart_from_the_gpu_agent() -> None:
    agent, gpu = _agent(), find(_objects(), "DaemonSet", "vgpu-device-plugin")
    spec = pod_spec(agent) or {}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "ascend": "on"}
    labels = agent["spec"]["template"]["metadata"]["labels"]
    # Neither DaemonSet's selector takes the other's pods.
    gpu_labels = gpu["spec"]["template"]["metadata"]["labels"]
    for selector, other in ((agent, gpu_labels), (gpu, labels)):
        wanted = selector["spec"]["selector"]["matchLabels"]
        assert not all(other.get(k) == v for k, v in wanted.items())
    assert labels["hami.io/webhook"] == "ignore"
    assert spec["serviceAccountName"] == (pod_spec(gpu) or {})["serviceAccountName"]


def test_the_agent_is_the_ascend_flavour_and_its_probes_match() -> None:
    from device_plugins.ascend.settings import AscendSettings
    from device_plugins.settings import DevicePluginSettings

    plugin = container(_agent(), "device-plugin")
    env = {e["name"]: e.get("value") for e in plugin["env"] if "value" in e}
    common = {
        name[len("VGPU_DP_") :].lower(): value
        for name, value in env.items()
        if not name.startswith("VGPU_DP_ASCEND_")
    }
    settings = DevicePluginSettings(**common)
    assert settings.vendor == "ascend"
    # The resource name comes from the chip npu-smi reports: none is set.
    assert "resource_name" not in common
    ascend = AscendSettings(
        **{k[len("VGPU_DP_ASCEND_") :].lower(): v for k, v in env.items() if "_ASCEND_" in k}
    )
    mounts = {m["mountPath"] for m in plugin["volumeMounts"]}
    assert ascend.npu_smi in mounts
    assert {str(ascend.core_dir), str(ascend.shared_region)} <= mounts
    ports = {p["name"]: p["containerPort"] for p in plugin["ports"]}
    assert settings.metrics_bind == ("0.0.0.0", ports["metrics"])
    assert plugin["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_only_prometheus_reaches_the_agents_metrics() -> None:
    policy = find(_objects(), "NetworkPolicy", "vgpu-device-plugin-ascend")
    labels = _agent()["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert all(labels.get(k) == v for k, v in selector.items())
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    (source,) = rule["from"]
    assert source["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
