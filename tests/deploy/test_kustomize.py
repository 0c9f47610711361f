"""The kustomize tree is whole: every entry exists, nothing is orphaned, overlays render."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import (
    BASE,
    DEPLOY,
    KUSTOMIZATION,
    OVERLAYS,
    buildable_dirs,
    container,
    env_values,
    find,
    json_patch,
    kustomization_dirs,
    load_documents,
    manifest_files,
    normalised,
    object_key,
    references,
    render,
    strategic_merge,
    volume_for_mount,
)

BUILDABLE = buildable_dirs()
ALL_REFERENCES = [ref for d in kustomization_dirs() for ref in references(d)]


def _id(path: Path) -> str:
    return str(path.relative_to(DEPLOY))


@pytest.mark.parametrize(
    "ref",
    ALL_REFERENCES,
    ids=[f"{_id(r.kustomization.parent)}:{_id(r.path)}" for r in ALL_REFERENCES],
)
def test_every_listed_entry_exists(ref) -> None:
    assert ref.path.exists(), f"{ref.kustomization} lists a missing {ref.field} entry {ref.path}"
    if ref.field == "components":
        assert (ref.path / KUSTOMIZATION).is_file()
        assert load_documents(ref.path / KUSTOMIZATION)[0]["kind"] == "Component"


@pytest.mark.parametrize("path", manifest_files(), ids=_id)
def test_every_manifest_is_used(path: Path) -> None:
    used = {ref.path for ref in ALL_REFERENCES}
    assert path.resolve() in used, f"{path} is in no kustomization"


def test_expected_layout() -> None:
    assert [d.name for d in BUILDABLE if d.parent == OVERLAYS] == ["cert-manager", "ha"]
    assert BASE in BUILDABLE


@pytest.mark.parametrize("directory", BUILDABLE, ids=_id)
def test_render_has_unique_objects(directory: Path) -> None:
    objects = render(directory)
    keys = [object_key(o) for o in objects]
    assert len(keys) == len(set(keys))
    assert all(o["metadata"].get("name") for o in objects)
    namespaced = [o for o in objects if o["kind"] not in CLUSTER_SCOPED]
    assert all(o["metadata"].get("namespace") for o in namespaced), "set namespaces in files"


CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
@pytest.mark.parametrize("directory", BUILDABLE, ids=_id)
def test_render_matches_kubectl_kustomize(directory: Path) -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    theirs = [doc for doc in yaml.safe_load_all(built) if doc]
    assert normalised(render(directory)) == normalised(theirs)


def test_base_is_one_replica_on_sqlite_with_a_claim() -> None:
    objects = render(BASE)
    deployment = find(objects, "Deployment", "vgpu-scheduler")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    url = env_values(container(deployment, "vgpu-extender"))["VGPU_DATABASE_URL"]
    assert url.startswith("sqlite:////")
    claim = volume_for_mount(deployment, "data")["persistentVolumeClaim"]["claimName"]
    assert find(objects, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_ha_is_two_replicas_on_postgres_without_a_claim() -> None:
    objects = render(OVERLAYS / "ha")
    deployment = find(objects, "Deployment", "vgpu-scheduler")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    extender = container(deployment, "vgpu-extender")
    url = [e for e in extender["env"] if e["name"] == "VGPU_DATABASE_URL"]
    assert len(url) == 1 and "value" not in url[0]
    secret_ref = url[0]["valueFrom"]["secretKeyRef"]
    assert secret_ref == {"name": "vgpu-postgres", "key": "url"}
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert volume_for_mount(deployment, "data") == {"name": "data", "emptyDir": {}}
    # The database is a CloudNativePG Cluster whose owner's Secret is the URL's Secret.
    postgres = find(objects, "Cluster", "vgpu-postgres")
    assert postgres["spec"]["bootstrap"]["initdb"]["secret"]["name"] == secret_ref["name"]
    assert not [o for o in objects if o["kind"] == "StatefulSet"]
    assert find(objects, "PodDisruptionBudget", "vgpu-scheduler")["spec"]["minAvailable"] == 1


def test_ha_keeps_everything_else_of_base() -> None:
    base = {object_key(o) for o in render(BASE)}
    ha = {object_key(o) for o in render(OVERLAYS / "ha")}
    removed = base - ha
    assert removed == {("v1", "PersistentVolumeClaim", "vgpu-system", "vgpu-extender-data")}


@pytest.mark.parametrize(
    ("base", "patch", "expected"),
    [
        ({"a": 1, "b": {"c": 2}}, {"b": {"d": 3}}, {"a": 1, "b": {"c": 2, "d": 3}}),
        ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
        (
            [{"name": "x", "v": 1}, {"name": "y", "v": 2}],
            [{"name": "y", "v": None, "w": 3}, {"name": "z"}],
            [{"name": "x", "v": 1}, {"name": "y", "w": 3}, {"name": "z"}],
        ),
        (["a", "b"], ["c"], ["c"]),
    ],
    ids=["maps-merge", "null-deletes", "named-lists-merge-by-name", "plain-lists-replace"],
)
def test_strategic_merge_semantics(base, patch, expected) -> None:
    assert strategic_merge(base, patch) == expected


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/m/k", "value": 1}], {"m": {"k": 1}, "l": [1, 2]}),
        ([{"op": "replace", "path": "/l/0", "value": 9}], {"m": {}, "l": [9, 2]}),
        ([{"op": "remove", "path": "/l/1"}], {"m": {}, "l": [1]}),
        ([{"op": "add", "path": "/l/-", "value": 3}], {"m": {}, "l": [1, 2, 3]}),
    ],
    ids=["add-key", "replace-index", "remove-index", "append"],
)
def test_json_patch_semantics(ops, expected) -> None:
    assert json_patch({"m": {}, "l": [1, 2]}, ops) == expected


def test_json_patch_refuses_replace_of_missing_key() -> None:
    with pytest.raises(KeyError, match="/m/missing"):
        json_patch({"m": {}}, [{"op": "replace", "path": "/m/missing", "value": 1}])


def test_device_plugin_probes_and_metrics_port_match_the_agent() -> None:
    from device_plugins.settings import DevicePluginSettings

    plugin = container(find(render(BASE), "DaemonSet", "vgpu-device-plugin"), "device-plugin")
    ports = {p["name"]: p["containerPort"] for p in plugin["ports"]}
    bind = DevicePluginSettings(metrics_address=env_values(plugin)["VGPU_DP_METRICS_ADDRESS"])
    assert bind.metrics_bind == ("0.0.0.0", ports["metrics"])
    probes = {kind: plugin[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"] == {"path": "/healthz", "port": "metrics"}
    assert probes["readinessProbe"] == {"path": "/readyz", "port": "metrics"}
