"""components/<vendor>: one switch per vendor beyond NVIDIA and Ascend, generated from
the vendor classes. Each, alone or with all the others, makes the extender serve the
vendor, kube-scheduler manage exactly the vendor's names, the webhook see its pods and
base's policy refuse privileged containers in them; none adds a workload (the vendors
keep their own device plugins)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml
from celpy.adapter import json_to_cel

from tests.deploy import scheduler_rules
from tests.deploy.admission_policies import admit, request
from tests.deploy.env_expansion import expand, expanded_env
from tests.deploy.manifests import (
    BASE,
    COMPONENTS,
    DEPLOY,
    container,
    find,
    normalised,
    object_key,
    render,
    scheduler_config,
    volume_for_mount,
)
from vgpu_extender.vendors.registry import VENDORS, create_vendor_set, create_vendors, vendor_names

GENERATOR_PATH = DEPLOY / "vendors" / "generate.py"
ALL = ("ascend", *(name for name in VENDORS if name not in ("nvidia", "ascend")))


@cache
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_components_generate", GENERATOR_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATED: tuple[str, ...] = tuple(_generator().generated_vendors())


@cache
def _overlay(components: tuple[str, ...]) -> Path:
    """An overlay of base with the components, as a user writes one."""
    directory = Path(tempfile.mkdtemp(prefix="vendor-overlay-"))
    spec = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(BASE, directory)],
        "components": [os.path.relpath(COMPONENTS / name, directory) for name in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return directory


@cache
def _objects(components: tuple[str, ...]) -> list[dict[str, Any]]:
    return render(_overlay(components))


def _deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return find(objects, "Deployment", "vgpu-scheduler")


def _joined(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """kube-scheduler's configuration as the init container writes it: its own command,
    run on the ConfigMap's keys laid out as the volume lays them out."""
    deployment = _deployment(objects)
    (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
    program, flag, script, source, target = init["command"]
    assert (program, flag) == ("python", "-c")
    config_map = volume_for_mount(deployment, "scheduler-config")["configMap"]["name"]
    data = find(objects, "ConfigMap", config_map)["data"]
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        (here / "in").mkdir()
        for key, text in data.items():
            (here / "in" / key).write_text(text, encoding="utf-8")
        out = here / "config.yaml"
        subprocess.run(
            [sys.executable, "-c", script, str(here / "in"), str(out)], check=True, timeout=60
        )
        joined: dict[str, Any] = yaml.safe_load(out.read_text(encoding="utf-8"))
    # What kube-scheduler reads is what the init container writes.
    scheduler = container(deployment, "kube-scheduler")
    assert f"--config={target}" in scheduler["command"]
    directory = target.rpartition("/")[0]
    for spec in (init, scheduler):
        (mount,) = [m for m in spec["volumeMounts"] if m["mountPath"] == directory]
        assert "emptyDir" in volume_for_mount(deployment, mount["name"])
    (mount,) = [m for m in init["volumeMounts"] if m["mountPath"] == source]
    assert volume_for_mount(deployment, mount["name"])["configMap"]["name"] == config_map
    return joined


def _managed(config: dict[str, Any]) -> list[dict[str, Any]]:
    (extender,) = config["extenders"]
    items: list[dict[str, Any]] = extender["managedResources"]
    return items


def _vendor_word(objects: list[dict[str, Any]]) -> str:
    return expanded_env(container(_deployment(objects), "vgpu-extender"))["VGPU_VENDOR"]


BASE_NAMES = {item["name"] for item in _managed(scheduler_config(render(BASE)))}


def test_components_are_generated_from_the_vendor_classes() -> None:
    for path, text in _generator().render().items():
        assert path.is_file(), f"{path} is missing: run python deploy/vendors/generate.py"
        assert path.read_text(encoding="utf-8") == text, (
            f"{path} differs from the vendor classes: run python deploy/vendors/generate.py"
        )


def test_every_vendor_beyond_nvidia_and_ascend_has_a_component() -> None:
    assert set(GENERATED) == set(VENDORS) - {"nvidia", "ascend"}
    assert len(GENERATED) == 9
    for name in GENERATED:
        assert (COMPONENTS / name / "kustomization.yaml").is_file()


def test_base_serves_nvidia_alone_and_names_every_vendors_switch() -> None:
    extender = container(_deployment(render(BASE)), "vgpu-extender")
    assert expanded_env(extender)["VGPU_VENDOR"] == "nvidia"
    literal = {e["name"]: e["value"] for e in extender["env"] if "value" in e}
    switches = {_generator().env_name(name) for name in ALL}
    assert {name for name in literal if name.startswith("VENDOR_")} == switches
    assert all(literal[name] == "" for name in switches)
    # No other vendor's names by default: kube-scheduler's config stays NVIDIA and Ascend.
    assert create_vendor_set("nvidia,ascend").resource_names == BASE_NAMES


@pytest.mark.parametrize("vendor", GENERATED)
def test_a_component_switches_on_its_vendor_and_nothing_else(vendor: str) -> None:
    objects = _objects((vendor,))
    added = {object_key(o) for o in objects} - {object_key(o) for o in render(BASE)}
    assert {key[1:] for key in added} == {
        (kind, "", f"vgpu-{vendor}-pods-unprivileged")
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    }
    word = _vendor_word(objects)
    assert word == f"nvidia,{vendor}"
    members = create_vendors(vendor)
    served = create_vendor_set(word)
    assert [m.name for m in served.members] == ["NVIDIA", *(m.name for m in members)]

    joined = _joined(objects)
    assert scheduler_rules.check(joined) == []
    managed = _managed(joined)
    names = [item["name"] for item in managed]
    assert len(names) == len(set(names))
    assert set(names) == BASE_NAMES | {n for m in members for n in m.resource_names}
    # A name the vendor reads from node capacity is a node resource kube-scheduler counts;
    # every other is ignored by it (no node advertises it).
    ignored = {item["name"]: item["ignoredByScheduler"] for item in managed}
    for member in members:
        for name in member.resource_names:
            assert ignored[name] is (name not in member.capacity_keys), name


def _hook(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    hooks = find(objects, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    (hit,) = [h for h in hooks if h["name"] == name]
    found: dict[str, Any] = hit
    return found


def _matches(hook: dict[str, Any], pod: dict[str, Any]) -> bool:
    (condition,) = hook["matchConditions"]
    environment = celpy.Environment()
    program = environment.program(environment.compile(condition["expression"]))
    return bool(program.evaluate({"object": json_to_cel(pod)}))


def _pod(resources: dict[str, str], *, field: str = "limits", init: bool = False) -> dict[str, Any]:
    ask = [{"name": "c", "image": "x", "resources": {field: resources}}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    spec["initContainers" if init else "containers"] = ask
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize("vendor", GENERATED)
def test_the_vendors_webhook_entry_sees_its_pods_only(vendor: str) -> None:
    objects = _objects((vendor,))
    base_hook = _hook(render(BASE), "pods.vgpu-extender.io")
    hook = _hook(objects, f"{vendor}.pods.vgpu-extender.io")
    # The same webhook as base's, for other pods.
    same = {k: v for k, v in hook.items() if k not in ("name", "matchConditions")}
    assert same == {k: v for k, v in base_hook.items() if k not in ("name", "matchConditions")}
    for name in sorted({n for m in create_vendors(vendor) for n in m.resource_names}):
        assert _matches(hook, _pod({name: "1"})), name
        assert _matches(hook, _pod({name: "1"}, field="requests", init=True)), name
    assert not _matches(hook, _pod({"nvidia.com/gpu": "1"}))
    assert not _matches(hook, _pod({"cpu": "1"}))


@pytest.mark.parametrize("vendor", GENERATED)
def test_a_privileged_container_in_the_vendors_pods_is_refused(vendor: str) -> None:
    objects = _objects((vendor,))
    name = f"vgpu-{vendor}-pods-unprivileged"
    policy = find(objects, "ValidatingAdmissionPolicy", name)
    binding = find(objects, "ValidatingAdmissionPolicyBinding", name)
    assert binding["spec"]["policyName"] == name
    assert binding["spec"]["validationActions"] == ["Deny"]
    # The pods its webhook entry sees, opted out of the webhook or not.
    hook = _hook(objects, f"{vendor}.pods.vgpu-extender.io")
    assert policy["spec"]["matchConditions"] == hook["matchConditions"]
    create = request(resource="pods", operation="CREATE", username="alice", namespace="ml")
    for resource in sorted({n for m in create_vendors(vendor) for n in m.resource_names}):
        pod = _pod({resource: "1"})
        pod["metadata"]["labels"] = {"hami.io/webhook": "ignore"}
        assert admit(policy, create, pod).allowed, resource
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        verdict = admit(policy, create, pod)
        assert verdict.matched and not verdict.allowed, resource
    assert not admit(policy, create, _pod({"nvidia.com/gpu": "1"})).matched


def test_every_component_together() -> None:
    objects = _objects(ALL)
    word = _vendor_word(objects)
    assert vendor_names(word) == ("nvidia", *ALL)
    joined = _joined(objects)
    assert scheduler_rules.check(joined) == []
    names = [item["name"] for item in _managed(joined)]
    assert len(names) == len(set(names))
    assert set(names) == create_vendor_set(word).resource_names
    hooks = find(objects, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    assert len({h["name"] for h in hooks}) == len(hooks) == 1 + len(GENERATED)
    # The Ascend component still adds its node agent and widens base's entry.
    assert find(objects, "DaemonSet", "vgpu-device-plugin-ascend")
    assert _matches(_hook(objects, "pods.vgpu-extender.io"), _pod({"huawei.com/Ascend910B3": "1"}))


@pytest.mark.parametrize("version", ["1.30.0", kubernetes_validate.latest_version()])
def test_every_component_together_validates(version: str) -> None:
    for obj in _objects(ALL):
        if obj["kind"] in (
            "Deployment",
            "ConfigMap",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ):
            kubernetes_validate.validate(obj, version, strict=True)


def _kubectl(components: tuple[str, ...]) -> list[dict[str, Any]]:
    built = subprocess.run(
        ["kubectl", "kustomize", str(_overlay(components))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(built) if doc]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
@pytest.mark.parametrize("components", [(GENERATED[0],), ALL], ids=[GENERATED[0], "all"])
def test_render_matches_kubectl_kustomize(components: tuple[str, ...]) -> None:
    theirs = _kubectl(components)
    assert normalised(_objects(components)) == normalised(theirs)
    # kustomize moves patched variables ahead of the others; each switch must stay above
    # VGPU_VENDOR, which the kubelet expands from the variables above it only.
    assert _vendor_word(theirs) == _vendor_word(_objects(components))


def test_expansion_follows_the_kubelet() -> None:
    defined = {"A": ",a", "E": ""}
    assert expand("x$(A)$(E)$(B)", defined) == "x,a$(B)"
    assert expand("$$(A)", defined) == "$(A)"
