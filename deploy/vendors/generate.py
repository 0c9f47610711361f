"""Write deploy/components/<vendor>/ for every vendor of the registry beyond NVIDIA and
Ascend, from the vendor classes themselves.

Each component is the one switch for its vendor: it adds the vendor's word to
``VGPU_VENDOR``, its resources to kube-scheduler's ``managedResources``, a webhook entry
for the pods that ask for them and base's refusal of privileged containers for those pods.
Components stack: each only adds (a ConfigMap key, an environment variable's value, a
webhook, a policy), so any set of them can be listed together.
The vendors keep their own device plugins: no DaemonSet here.

kube-scheduler reads one file, and kustomize cannot append to a list inside a ConfigMap's
text, so each component adds its list as a key ``managed-<vendor>.yaml`` and an init
container joins base's ``config.yaml`` with every such key before kube-scheduler starts
(the same patch in every component, so listing several changes nothing more).

Run from the repository root with the project installed: ``python
deploy/vendors/generate.py``; tests/deploy/test_vendor_components.py fails while a
component differs from what this writes.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DEPLOY = HERE.parent
BASE = DEPLOY / "base"
COMPONENTS = DEPLOY / "components"
sys.path.insert(0, str(DEPLOY.parent))

from vgpu_extender.vendors.registry import VENDORS, create_vendors  # noqa: E402

#: Served by base (NVIDIA) or switched on by components/ascend, written by hand.
NOT_GENERATED = ("nvidia", "ascend")

#: Each vendor's device plugin: the vendor's own, deployed as HAMi documents it.
DEVICE_PLUGINS: dict[str, str] = {
    "cambricon": "Cambricon's cambricon-device-plugin, --mode=dynamic-smlu --min-dsmlu-unit=256",
    "hygon": "HAMi's dcu-vgpu-device-plugin (Hygon's own plugin serves hygon.com/dcu only)",
    "iluvatar": "Iluvatar's gpu-manager (not gpu-admission)",
    "metax": "MetaX's gpu-device plugin (whole GPUs) or sgpu-device plugin (sGPU)",
    "enflame": "Enflame's gcu device plugin (whole GCUs) or its DRS plugin (partitions)",
    "kunlun": "Kunlunxin's xpu device plugin (whole XPUs) or its vXPU plugin",
    "mthreads": "Moore Threads' mthreads device plugin (sGPU mode)",
    "awsneuron": "AWS's neuron device plugin",
    "amd": "AMD's device plugin with HAMi's registration (hami.io/node-amd-register)",
}

#: Where the init container writes the joined configuration for kube-scheduler.
JOINED_DIR = "/run/vgpu-scheduler"
JOINED_VOLUME = "scheduler-config-joined"
CONFIG_KEY = "config.yaml"
INIT_CONTAINER = "scheduler-config"

#: The init container's program: base's config.yaml with every managed-*.yaml list
#: appended to the one extender's managedResources, written for kube-scheduler.
JOIN_SCRIPT = """\
import glob, os, sys, yaml
source, target = sys.argv[1:]
with open(os.path.join(source, "config.yaml")) as f:
    config = yaml.safe_load(f)
(extender,) = config["extenders"]
for path in sorted(glob.glob(os.path.join(source, "managed-*.yaml"))):
    with open(path) as f:
        extender["managedResources"] += yaml.safe_load(f)
with open(target, "w") as f:
    yaml.safe_dump(config, f, sort_keys=False)
"""


def env_name(vendor: str) -> str:
    """The variable holding ``,<vendor>`` when the vendor is on (empty otherwise), which
    base's ``VGPU_VENDOR`` references. Not ``VGPU_``-prefixed: it is no setting."""
    return f"VENDOR_{vendor.upper()}"


def managed_key(vendor: str) -> str:
    return f"managed-{vendor}.yaml"


def managed_resources(vendor: str) -> list[dict[str, Any]]:
    """The vendor's managedResources: every name its members serve; those the vendor
    reads from node capacity are real node resources, counted by kube-scheduler as the
    kubelet counts them, and every other name is ignored by kube-scheduler (no node
    advertises it: otherwise pods fail with ``Insufficient <name>``)."""
    items: list[dict[str, Any]] = []
    for member in create_vendors(vendor):
        capacity = set(member.capacity_keys)
        for name in sorted(member.resource_names):
            items.append({"name": name, "ignoredByScheduler": name not in capacity})
    return items


def match_expression(names: list[str]) -> str:
    """The webhook condition: a container or init container names one of ``names``
    (the shape of base's condition)."""
    listed = ", ".join(f"'{name}'" for name in names)
    one = (
        f"has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, r in "
        f"[{listed}])) || (has(c.resources.requests) && c.resources.requests.exists(r, r in "
        f"[{listed}])))"
    )
    return (
        f"object.spec.containers.exists(c, {one}) || (has(object.spec.initContainers) && "
        f"object.spec.initContainers.exists(c, {one}))"
    )


def _base_objects() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name in ("scheduler.yaml", "webhook.yaml", "policy-gpu-pods.yaml"):
        with (BASE / name).open(encoding="utf-8") as handle:
            for doc in yaml.safe_load_all(handle):
                if doc:
                    found[doc["kind"]] = doc
    return found


def _container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    (hit,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    found: dict[str, Any] = hit
    return found


def _image(deployment: dict[str, Any]) -> str:
    """The extender's image as base's kustomization tags it (the init container is added
    after base's ``images:`` ran)."""
    image: str = _container(deployment, "vgpu-extender")["image"]
    with (BASE / "kustomization.yaml").open(encoding="utf-8") as handle:
        images = yaml.safe_load(handle).get("images") or []
    name = image.partition(":")[0]
    for entry in images:
        if entry["name"] == name:
            return f"{entry.get('newName', name)}:{entry['newTag']}"
    return image


def scheduler_patch(vendor: str, deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment patch: the joining init container, kube-scheduler reading the
    joined file (same in every component) and the vendor's word for ``VGPU_VENDOR``."""
    scheduler = _container(deployment, "kube-scheduler")
    (source,) = [m for m in scheduler["volumeMounts"] if m["name"] == "scheduler-config"]
    command = [
        f"--config={JOINED_DIR}/{CONFIG_KEY}" if arg.startswith("--config=") else arg
        for arg in scheduler["command"]
    ]
    init = {
        "name": INIT_CONTAINER,
        "image": _image(deployment),
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", JOIN_SCRIPT, source["mountPath"], f"{JOINED_DIR}/{CONFIG_KEY}"],
        "resources": {
            "requests": {"cpu": "10m", "memory": "32Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"},
        },
        "securityContext": copy.deepcopy(scheduler["securityContext"]),
        "volumeMounts": [
            {"name": source["name"], "mountPath": source["mountPath"], "readOnly": True},
            {"name": JOINED_VOLUME, "mountPath": JOINED_DIR},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": deployment["metadata"]["name"], "namespace": "vgpu-system"},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [init],
                    "containers": [
                        {
                            "name": "kube-scheduler",
                            "command": command,
                            "volumeMounts": [
                                {"name": JOINED_VOLUME, "mountPath": JOINED_DIR, "readOnly": True}
                            ],
                        },
                        {
                            "name": "vgpu-extender",
                            "env": [{"name": env_name(vendor), "value": f",{vendor}"}],
                        },
                    ],
                    "volumes": [{"name": JOINED_VOLUME, "emptyDir": {}}],
                }
            }
        },
    }


def config_patch(vendor: str) -> dict[str, Any]:
    """The ConfigMap patch: the vendor's managedResources as a key of its own."""
    listed = yaml.safe_dump(managed_resources(vendor), sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "vgpu-scheduler-config", "namespace": "vgpu-system"},
        "data": {managed_key(vendor): listed},
    }


def _condition(vendor: str) -> dict[str, str]:
    names = [item["name"] for item in managed_resources(vendor)]
    return {"name": f"requests-a-{vendor}-resource", "expression": match_expression(names)}


def policies(vendor: str, base: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Base's refusal of privileged containers in GPU pods, for the vendor's pods: the
    policy and its binding under names of their own, the condition the vendor's."""
    name = f"vgpu-{vendor}-pods-unprivileged"
    policy = copy.deepcopy(base["ValidatingAdmissionPolicy"])
    policy["metadata"]["name"] = name
    policy["spec"]["matchConditions"] = [_condition(vendor)]
    binding = copy.deepcopy(base["ValidatingAdmissionPolicyBinding"])
    binding["metadata"]["name"] = name
    binding["spec"]["policyName"] = name
    return [policy, binding]


def webhook_patch(vendor: str, webhook: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch appending a webhook entry for the vendor's pods: base's entry with
    its own name and condition (matchConditions are ANDed, so a condition cannot be
    widened by adding one; entries are ORed)."""
    entry = copy.deepcopy(webhook["webhooks"][0])
    entry["name"] = f"{vendor}.pods.vgpu-extender.io"
    entry["matchConditions"] = [_condition(vendor)]
    return [{"op": "add", "path": "/webhooks/-", "value": entry}]


def kustomization(vendor: str) -> dict[str, Any]:
    webhook = {
        "group": "admissionregistration.k8s.io",
        "version": "v1",
        "kind": "MutatingWebhookConfiguration",
        "name": "vgpu-extender",
    }
    return {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "resources": ["policy-gpu-pods.yaml"],
        "patches": [
            {"path": "patch-scheduler-config.yaml"},
            {"path": "patch-scheduler.yaml"},
            {"path": "patch-webhook.yaml", "target": webhook},
        ],
    }


def _header(vendor: str) -> str:
    words = ", ".join(m.name for m in create_vendors(vendor))
    return (
        f"# Generated by deploy/vendors/generate.py from the vendor classes: regenerate,\n"
        f"# do not edit. {vendor} ({words}) beside NVIDIA: add `{vendor}` to VGPU_VENDOR,\n"
        f"# its resources to kube-scheduler's managedResources, a webhook entry for its pods\n"
        f"# and the refusal of privileged containers in them. Its device plugin (run it as\n"
        f"# HAMi documents it; no DaemonSet here):\n"
        f"#   {DEVICE_PLUGINS[vendor]}.\n"
    )


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so the files read as written."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, width=100)


def generated_vendors() -> list[str]:
    return [name for name in VENDORS if name not in NOT_GENERATED]


def render() -> dict[Path, str]:
    """Every generated file and its text."""
    base = _base_objects()
    files: dict[Path, str] = {}
    for vendor in generated_vendors():
        folder = COMPONENTS / vendor
        header = _header(vendor)
        usage = f"# Add to an overlay:\n#   components:\n#     - ../../components/{vendor}\n"
        files[folder / "kustomization.yaml"] = header + usage + _dump(kustomization(vendor))
        files[folder / "patch-scheduler-config.yaml"] = header + _dump(config_patch(vendor))
        deployment = scheduler_patch(vendor, base["Deployment"])
        files[folder / "patch-scheduler.yaml"] = header + _dump(deployment)
        hooks = webhook_patch(vendor, base["MutatingWebhookConfiguration"])
        files[folder / "patch-webhook.yaml"] = header + _dump(hooks)
        policy, binding = (_dump(obj) for obj in policies(vendor, base))
        files[folder / "policy-gpu-pods.yaml"] = header + policy + "---\n" + binding
    return files


if __name__ == "__main__":
    for path, text in render().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
