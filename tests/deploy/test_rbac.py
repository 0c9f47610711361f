"""RBAC: exactly the verbs each component uses, no wildcard, no admin roles."""

from __future__ import annotations

import pytest

from tests.deploy.manifests import (
    BASE,
    DEPLOY,
    buildable_dirs,
    render,
    scheduler_config,
)

BUILDABLE = buildable_dirs()
RENDERED = {str(d.relative_to(DEPLOY)): render(d) for d in BUILDABLE}
ROLE_KINDS = ("ClusterRole", "Role")
BINDING_KINDS = ("ClusterRoleBinding", "RoleBinding")
#: Built-in roles a second kube-scheduler is bound to; nothing broader.
BUILTIN_ROLES = {
    ("ClusterRole", "system:kube-scheduler"),
    ("ClusterRole", "system:volume-scheduler"),
    ("Role", "extension-apiserver-authentication-reader"),
}
ADMIN_ROLES = {"cluster-admin", "admin", "edit"}


def _rules(objects, kind: str, name: str) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples granted by one role."""
    roles = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(roles) == 1, f"{kind} {name}"
    return {
        (group, resource, verb)
        for rule in roles[0]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _grants(*entries: tuple[str, str, tuple[str, ...]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for g, r, verbs in entries for v in verbs}


EXPECTED = [
    (
        "ClusterRole",
        "vgpu-extender",
        _grants(
            ("", "pods", ("get", "list", "watch", "patch")),
            ("", "pods/binding", ("create",)),
            ("", "nodes", ("get", "list", "watch", "patch")),
            ("", "events", ("create",)),
            ("policy", "poddisruptionbudgets", ("list",)),
        ),
    ),
    (
        "Role",
        "vgpu-scheduler-leader-election",
        _grants(("coordination.k8s.io", "leases", ("get", "create", "update"))),
    ),
    (
        "ClusterRole",
        "vgpu-device-plugin",
        _grants(("", "nodes", ("get", "patch")), ("", "pods", ("get", "list", "patch"))),
    ),
]


@pytest.mark.parametrize(("kind", "name", "expected"), EXPECTED, ids=[e[1] for e in EXPECTED])
def test_role_grants_exactly(kind: str, name: str, expected) -> None:
    assert _rules(RENDERED["base"], kind, name) == expected


def test_device_plugin_role_is_smaller_than_the_extenders() -> None:
    plugin = _rules(RENDERED["base"], "ClusterRole", "vgpu-device-plugin")
    extender = _rules(RENDERED["base"], "ClusterRole", "vgpu-extender")
    assert plugin < extender


@pytest.mark.parametrize("where", list(RENDERED))
def test_no_role_grants_a_wildcard(where: str) -> None:
    for role in (o for o in RENDERED[where] if o["kind"] in ROLE_KINDS):
        for rule in role.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in (rule.get(field) or []), f"{role['metadata']['name']}: {field}"
        assert "aggregationRule" not in role


@pytest.mark.parametrize("where", list(RENDERED))
def test_bindings_point_at_our_roles_and_accounts(where: str) -> None:
    objects = RENDERED[where]
    ours = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in ROLE_KINDS}
    accounts = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "ServiceAccount"
    }
    bindings = [o for o in objects if o["kind"] in BINDING_KINDS]
    assert bindings
    for binding in bindings:
        ref = (binding["roleRef"]["kind"], binding["roleRef"]["name"])
        assert ref[1] not in ADMIN_ROLES
        assert ref in ours or ref in BUILTIN_ROLES, f"{binding['metadata']['name']} -> {ref}"
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert (subject["namespace"], subject["name"]) in accounts


def test_each_workload_runs_under_its_own_account() -> None:
    objects = RENDERED["base"]
    accounts = {
        o["kind"]: o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objects
        if o["kind"] in ("Deployment", "DaemonSet")
    }
    assert accounts == {"Deployment": "vgpu-scheduler", "DaemonSet": "vgpu-device-plugin"}


def test_leader_election_role_lives_where_the_lease_does() -> None:
    objects = render(BASE)
    election = scheduler_config(objects)["leaderElection"]
    roles = [
        o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == "vgpu-scheduler-leader-election"
    ]
    assert roles[0]["metadata"]["namespace"] == election["resourceNamespace"]
    assert election["resourceLock"] == "leases"
