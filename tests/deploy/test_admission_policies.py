"""The ValidatingAdmissionPolicies of deploy/, their CEL run against requests.

The node agent may change only its own node and pods bound to it, and only their
annotations, known by its token's node claim; a GPU pod may hold no privileged
container, whatever its labels.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.deploy.admission_policies import Verdict, admit, request
from tests.deploy.manifests import BASE, find, render

OBJECTS = render(BASE)
OWN_NODE = find(OBJECTS, "ValidatingAdmissionPolicy", "vgpu-device-plugin-own-node")
UNPRIVILEGED = find(OBJECTS, "ValidatingAdmissionPolicy", "vgpu-gpu-pods-unprivileged")
AGENT = "system:serviceaccount:vgpu-system:vgpu-device-plugin"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


# --------------------------------------------------------------------------- node agent
def _node(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": dict(annotations or {}),
        },
        "spec": {"podCIDR": "10.0.1.0/24"},
    }


def _pod(node: str | None, *, privileged: str = "", gpu: str = "main") -> dict[str, Any]:
    def container(name: str) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "image": "cuda"}
        if name == gpu:
            c["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        if name == privileged:
            c["securityContext"] = {"privileged": True}
        return c

    spec: dict[str, Any] = {"containers": [container("main"), container("sidecar")]}
    spec["initContainers"] = [container("setup")]
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"app": "train"}},
        "spec": spec,
    }


def _agent_on(node: str | None, resource: str, **fields: Any) -> dict[str, Any]:
    extra = None if node is None else {NODE_CLAIM: [node]}
    return request(resource=resource, username=AGENT, extra=extra, **fields)


def _annotated(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"].setdefault("annotations", {})["hami.io/node-nvidia-register"] = "[]"
    return changed


def _node_patch(agent_node: str | None, target: str, change: Any = _annotated) -> Verdict:
    old = _node(target)
    return admit(OWN_NODE, _agent_on(agent_node, "nodes", name=target), change(old), old)


def _pod_patch(agent_node: str | None, pod_node: str | None, change: Any = _annotated) -> Verdict:
    old = _pod(pod_node)
    req = _agent_on(agent_node, "pods", name="train", namespace="ml")
    return admit(OWN_NODE, req, change(old), old)


def test_the_agent_annotates_its_own_node() -> None:
    verdict = _node_patch("gpu-1", "gpu-1")
    assert verdict.matched and verdict.allowed


def test_the_agent_may_not_touch_another_node() -> None:
    verdict = _node_patch("gpu-1", "gpu-2")
    assert verdict.denials == ["the node agent on gpu-1 may change only its own node, not gpu-2"]


def _relabel(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"]["labels"]["nvidia.com/gpu.present"] = "true"
    return changed


def _cordon(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["spec"]["unschedulable"] = True
    return changed


def _finalize(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"]["finalizers"] = ["example.com/hold"]
    return changed


def _unlabel(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    del changed["metadata"]["labels"]
    return changed


@pytest.mark.parametrize(
    "change",
    [_relabel, _unlabel, _cordon, _finalize],
    ids=["label", "unlabel", "spec", "finalizer"],
)
def test_the_agent_changes_only_annotations_of_its_node(change: Any) -> None:
    verdict = _node_patch("gpu-1", "gpu-1", change)
    assert len(verdict.denials) == 1 and "only annotations" in verdict.denials[0]


@pytest.mark.parametrize(
    "extra",
    [None, {}, {NODE_CLAIM: []}, {NODE_CLAIM: ["gpu-1", "gpu-2"]}],
    ids=["no-extra", "no-claim", "empty-claim", "two-claims"],
)
def test_a_token_without_one_node_claim_changes_nothing(extra: Any) -> None:
    old = _node("gpu-1")
    req = request(resource="nodes", username=AGENT, extra=extra, name="gpu-1")
    verdict = admit(OWN_NODE, req, _annotated(old), old)
    assert verdict.matched and not verdict.allowed
    assert "carries no node claim" in verdict.denials[0]


def test_the_agent_annotates_pods_bound_to_its_node() -> None:
    verdict = _pod_patch("gpu-1", "gpu-1")
    assert verdict.matched and verdict.allowed


@pytest.mark.parametrize("pod_node", ["gpu-2", None], ids=["other-node", "not-bound"])
def test_the_agent_may_not_touch_pods_elsewhere(pod_node: str | None) -> None:
    verdict = _pod_patch("gpu-1", pod_node)
    assert verdict.denials == [
        "the node agent on gpu-1 may change only pods bound to its node, not ml/train"
    ]


def test_the_agent_may_not_relabel_a_pod_on_its_node() -> None:
    verdict = _pod_patch("gpu-1", "gpu-1", _relabel)
    assert len(verdict.denials) == 1 and "only annotations" in verdict.denials[0]


def test_other_accounts_are_not_this_policys_business() -> None:
    old = _node("gpu-2")
    extender = request(
        resource="nodes", username="system:serviceaccount:vgpu-system:vgpu-scheduler", name="gpu-2"
    )
    assert not admit(OWN_NODE, extender, _relabel(old), old).matched


def test_the_policy_names_the_agents_account_and_covers_what_rbac_grants() -> None:
    (account,) = [
        o
        for o in OBJECTS
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "vgpu-device-plugin"
    ]
    namespace = account["metadata"]["namespace"]
    assert f"system:serviceaccount:{namespace}:vgpu-device-plugin" == AGENT
    (condition,) = OWN_NODE["spec"]["matchConditions"]
    assert f"'{AGENT}'" in condition["expression"]
    role = find(OBJECTS, "ClusterRole", "vgpu-device-plugin")
    writable = {r for rule in role["rules"] if "patch" in rule["verbs"] for r in rule["resources"]}
    (rule,) = OWN_NODE["spec"]["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) == writable and rule["operations"] == ["UPDATE"]
    binding = find(OBJECTS, "ValidatingAdmissionPolicyBinding", "vgpu-device-plugin-own-node")
    assert binding["spec"] == {
        "policyName": OWN_NODE["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert OWN_NODE["spec"]["failurePolicy"] == "Fail"


# --------------------------------------------------------------------------- GPU pods
def _create(pod: dict[str, Any]) -> Verdict:
    req = request(resource="pods", operation="CREATE", username="alice", namespace="ml")
    return admit(UNPRIVILEGED, req, pod)


@pytest.mark.parametrize(
    ("privileged", "gpu"),
    [("main", "main"), ("sidecar", "main"), ("setup", "main"), ("main", "setup")],
    ids=["the-gpu-container", "a-sidecar", "an-init-container", "gpu-in-init-only"],
)
def test_a_privileged_container_in_a_gpu_pod_is_refused(privileged: str, gpu: str) -> None:
    verdict = _create(_pod(None, privileged=privileged, gpu=gpu))
    assert verdict.matched and len(verdict.denials) == 1
    assert "privileged container in a pod that asks for a GPU" in verdict.denials[0]


def test_the_opt_out_label_does_not_skip_the_check() -> None:
    pod = _pod(None, privileged="sidecar")
    pod["metadata"]["labels"]["hami.io/webhook"] = "ignore"
    verdict = _create(pod)
    assert not verdict.allowed
    assert verdict.matched and len(verdict.denials) == 1
    assert "privileged container in a pod that asks for a GPU" in verdict.denials[0]


def test_an_unprivileged_gpu_pod_is_admitted() -> None:
    verdict = _create(_pod(None))
    assert verdict.matched and verdict.allowed


def test_a_privileged_pod_without_gpus_is_not_this_policys_business() -> None:
    assert not _create(_pod(None, privileged="main", gpu="")).matched


def test_a_privileged_debug_container_added_to_a_gpu_pod_is_refused() -> None:
    old = _pod("gpu-1")
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    ]
    req = request(
        resource="pods", sub_resource="ephemeralcontainers", username="alice", namespace="ml"
    )
    verdict = admit(UNPRIVILEGED, req, new, old)
    assert not verdict.allowed
    assert verdict.matched and len(verdict.denials) == 1
    assert "privileged container in a pod that asks for a GPU" in verdict.denials[0]
    new["spec"]["ephemeralContainers"][0]["securityContext"]["privileged"] = False
    assert admit(UNPRIVILEGED, req, new, old).allowed


def test_pod_updates_other_than_debug_containers_are_not_checked() -> None:
    """A finalizer removed from a privileged GPU pod made before the policy still goes."""
    old = _pod("gpu-1", privileged="main")
    req = request(resource="pods", username="kube-controller-manager", namespace="ml")
    assert not admit(UNPRIVILEGED, req, old, old).matched


def test_the_policy_selects_gpu_pods_as_the_webhook_does() -> None:
    (hook,) = find(OBJECTS, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    (ours,) = UNPRIVILEGED["spec"]["matchConditions"]
    assert ours["expression"] == hook["matchConditions"][0]["expression"]
    binding = find(OBJECTS, "ValidatingAdmissionPolicyBinding", "vgpu-gpu-pods-unprivileged")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "matchResources" not in binding["spec"]  # every namespace, opted out or not
