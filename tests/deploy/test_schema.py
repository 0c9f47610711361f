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


@pytest.mark.parametrize("key", list(CRD_OBJECTS), ids=_ids(list(CRD_OBJECTS)))
def test_cert_manager_objects_are_well_formed(key: tuple[str, str]) -> None:
    obj = CRD_OBJECTS[key]
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


def test_every_overlay_adds_objects_of_its_own() -> None:
    assert {where for where, _ in K8S_OBJECTS} == {str(d.relative_to(DEPLOY)) for d in BUILDABLE}
    assert {where for where, _ in CRD_OBJECTS} == {"overlays/cert-manager"}
