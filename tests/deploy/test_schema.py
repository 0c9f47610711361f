"""Every object deploy/ creates validates, strictly, against the Kubernetes schema."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    BASE,
    DEPLOY,
    buildable_dirs,
    find,
    is_crd_object,
    object_key,
    render,
)

#: The oldest release the manifests support (matchConditions went GA in 1.30), the
#: release of the kube-scheduler image, and the newest schema kubernetes-validate has.
VERSIONS = ["1.30.0", "1.33.0", kubernetes_validate.latest_version()]

BUILDABLE = buildable_dirs()


def _unique_objects() -> dict[tuple[str, str], dict]:
    """Each distinct object once, under the first overlay that renders it."""
    seen: set[str] = set()
    found = {}
    for directory in BUILDABLE:
        for obj in render(directory):
            text = json.dumps(obj, sort_keys=True)
            if text in seen:
                continue
            seen.add(text)
            found[(str(directory.relative_to(DEPLOY)), "/".join(object_key(obj)[1::2]))] = obj
    return found


OBJECTS = _unique_objects()
K8S_OBJECTS = {key: obj for key, obj in OBJECTS.items() if not is_crd_object(obj)}
CRD_OBJECTS = {key: obj for key, obj in OBJECTS.items() if is_crd_object(obj)}


def _ids(keys: list[tuple[str, str]]) -> list[str]:
    return [f"{where}:{what}" for where, what in keys]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("key", list(K8S_OBJECTS), ids=_ids(list(K8S_OBJECTS)))
def test_object_validates(key: tuple[str, str], version: str) -> None:
    kubernetes_validate.validate(K8S_OBJECTS[key], version, strict=True)


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicy=3), "3"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(comand=["x"]), "comand"),
        (lambda d: d["spec"].pop("selector"), "selector"),
    ],
    ids=["wrong-type", "unknown-key", "missing-required"],
)
def test_validation_is_strict(mutate, error: str) -> None:
    """The check above would catch a typo: a broken Deployment is refused."""
    deployment = copy.deepcopy(find(render(BASE), "Deployment", "vgpu-scheduler"))
    mutate(deployment)
    with pytest.raises(kubernetes_validate.ValidationError, match=error):
        kubernetes_validate.validate(deployment, VERSIONS[1], strict=True)


#: cert-manager's kinds, which no Kubernetes schema has: the fields they must carry.
CERT_MANAGER_REQUIRED = {
    "Issuer": [("spec",)],
    "Certificate": [("spec", "secretName"), ("spec", "issuerRef", "name")],
}


CERT_MANAGER_OBJECTS = {
    key: obj for key, obj in CRD_OBJECTS.items() if obj["apiVersion"].startswith("cert-manager.io/")
}
CNPG_OBJECTS = {
    key: obj
    for key, obj in CRD_OBJECTS.items()
    if obj["apiVersion"].startswith("postgresql.cnpg.io/")
}


def test_every_custom_resource_is_checked_somewhere() -> None:
    assert CRD_OBJECTS.keys() == CERT_MANAGER_OBJECTS.keys() | CNPG_OBJECTS.keys()


@pytest.mark.parametrize("key", list(CERT_MANAGER_OBJECTS), ids=_ids(list(CERT_MANAGER_OBJECTS)))
def test_cert_manager_objects_are_well_formed(key: tuple[str, str]) -> None:
    obj = CERT_MANAGER_OBJECTS[key]
    assert obj["apiVersion"] == "cert-manager.io/v1"
    assert obj["kind"] in CERT_MANAGER_REQUIRED
    for path in CERT_MANAGER_REQUIRED[obj["kind"]]:
        node = obj
        for part in path:
            assert part in node, f"{obj['kind']} {obj['metadata']['name']} lacks {'.'.join(path)}"
            node = node[part]
    issuer = obj["spec"].get("issuerRef")
    if issuer is not None:
        names = {o["metadata"]["name"] for o in CRD_OBJECTS.values() if o["kind"] == issuer["kind"]}
        assert issuer["name"] in names


#: CloudNativePG Cluster fields the HA overlay relies on (the operator's CRD is not in
#: the Kubernetes schema), each with the type it must have.
CNPG_CLUSTER_FIELDS: dict[tuple[str, ...], type] = {
    ("spec", "instances"): int,
    ("spec", "minSyncReplicas"): int,
    ("spec", "maxSyncReplicas"): int,
    ("spec", "bootstrap", "initdb", "database"): str,
    ("spec", "bootstrap", "initdb", "owner"): str,
    ("spec", "bootstrap", "initdb", "secret", "name"): str,
    ("spec", "storage", "size"): str,
}
#: Every key a Cluster in deploy/ may use under spec (a typo is caught here).
CNPG_CLUSTER_SPEC_KEYS = {
    "instances",
    "imageName",
    "minSyncReplicas",
    "maxSyncReplicas",
    "primaryUpdateStrategy",
    "bootstrap",
    "storage",
    "affinity",
    "inheritedMetadata",
    "resources",
    "postgresql",
}


@pytest.mark.parametrize("key", list(CNPG_OBJECTS), ids=_ids(list(CNPG_OBJECTS)))
def test_cloudnativepg_cluster_is_highly_available(key: tuple[str, str]) -> None:
    obj = CNPG_OBJECTS[key]
    assert (obj["apiVersion"], obj["kind"]) == ("postgresql.cnpg.io/v1", "Cluster")
    for path, kind in CNPG_CLUSTER_FIELDS.items():
        node = obj
        for part in path:
            assert part in node, f"Cluster {obj['metadata']['name']} lacks {'.'.join(path)}"
            node = node[part]
        assert isinstance(node, kind), f"{'.'.join(path)}: {node!r} is not a {kind.__name__}"
    spec = obj["spec"]
    assert set(spec) <= CNPG_CLUSTER_SPEC_KEYS, set(spec) - CNPG_CLUSTER_SPEC_KEYS
    # A primary and two standbys; a commit answered only once a standby has it (so a
    # failover loses no answered bind); writes going on with one standby lost (the
    # operator asks for no fewer than minSyncReplicas, and one fewer are left).
    assert spec["instances"] >= 3
    assert 1 <= spec["minSyncReplicas"] <= spec["maxSyncReplicas"] <= spec["instances"] - 1
    assert spec["minSyncReplicas"] <= spec["instances"] - 2


def test_every_overlay_adds_objects_of_its_own() -> None:
    assert {where for where, _ in K8S_OBJECTS} == {str(d.relative_to(DEPLOY)) for d in BUILDABLE}
    assert {where for where, _ in CERT_MANAGER_OBJECTS} == {"overlays/cert-manager"}
    assert {where for where, _ in CNPG_OBJECTS} == {"overlays/ha"}
