"""Reading ``deploy/``: YAML documents, kustomizations, and a small kustomize renderer.

The renderer covers what ``deploy/`` uses (resources, components, strategic-merge
patches by file, ``$patch: delete``, JSON 6902 patches with a target, ``images``)
so the tests need no kustomize binary; where ``kubectl`` is installed a test checks
that it renders the same objects.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.support.json_patch import json_patch

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
OVERLAYS = DEPLOY / "overlays"
COMPONENTS = DEPLOY / "components"
DOCKER = DEPLOY / "docker"

KUSTOMIZATION = "kustomization.yaml"
#: Kinds that come from CRDs (cert-manager, CloudNativePG); the Kubernetes schema does
#: not know them, so tests check their structure instead.
CRD_GROUPS = ("cert-manager.io/", "postgresql.cnpg.io/")

Obj = dict[str, Any]


def load_documents(path: Path) -> list[Obj]:
    """Every non-empty YAML document of a file (a fresh copy each call)."""
    return copy.deepcopy(_parsed(path.resolve()))


@cache
def _parsed(path: Path) -> list[Obj]:
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def kustomization_dirs() -> list[Path]:
    """Every folder under deploy/ holding a kustomization, base first."""
    return sorted((p.parent for p in DEPLOY.rglob(KUSTOMIZATION)), key=lambda p: (p != BASE, p))


def buildable_dirs() -> list[Path]:
    """The kustomizations one can build (``kubectl apply -k``), components left out."""
    return [
        d
        for d in kustomization_dirs()
        if load_documents(d / KUSTOMIZATION)[0]["kind"] == "Kustomization"
    ]


def manifest_files() -> list[Path]:
    """Every YAML file under deploy/ that is a resource or a patch (not a kustomization;
    not deploy/prometheus/, Prometheus' own rule file and its promtool tests)."""
    prometheus = DEPLOY / "prometheus"
    return sorted(
        p
        for p in DEPLOY.rglob("*.yaml")
        if p.name != KUSTOMIZATION and not p.is_relative_to(prometheus)
    )


def object_key(obj: Obj) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
    )


def is_crd_object(obj: Obj) -> bool:
    return str(obj.get("apiVersion", "")).startswith(CRD_GROUPS)


# --- strategic merge (the subset Kubernetes' merge keys need here) -------------------


def _named_list(items: Any) -> bool:
    return isinstance(items, list) and all(
        isinstance(item, dict) and "name" in item for item in items
    )


def strategic_merge(base: Any, patch: Any) -> Any:
    """Merge ``patch`` into ``base``: maps recursively, ``None`` deletes a key, lists of
    named objects (containers, env, volumes, mounts, ports) merge by name with new items
    appended, any other list is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value)
            else:
                merged[key] = _strip_nulls(value)
        return merged
    if _named_list(base) and _named_list(patch) and patch:
        result = [copy.deepcopy(item) for item in base]
        positions = {item["name"]: index for index, item in enumerate(result)}
        for item in patch:
            if item["name"] in positions:
                index = positions[item["name"]]
                result[index] = strategic_merge(result[index], item)
            else:
                result.append(_strip_nulls(item))
        return result
    return _strip_nulls(copy.deepcopy(patch))


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _matches(obj: Obj, target: dict[str, Any]) -> bool:
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    meta = obj.get("metadata") or {}
    checks = {
        "group": group,
        "version": version,
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
    }
    return all(checks[key] == value for key, value in target.items() if key in checks)


# --- the renderer ---------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """One path a kustomization names, and under which field."""

    kustomization: Path
    field: str
    path: Path


def references(directory: Path) -> Iterator[Reference]:
    """The files and folders a kustomization (or component) refers to."""
    spec = load_documents(directory / KUSTOMIZATION)[0]
    here = directory / KUSTOMIZATION
    for field in ("resources", "components"):
        for entry in spec.get(field) or []:
            yield Reference(here, field, (directory / entry).resolve())
    for patch in spec.get("patches") or []:
        if "path" in patch:
            yield Reference(here, "patches", (directory / patch["path"]).resolve())


def render(directory: Path) -> list[Obj]:
    """The objects ``kustomize build directory`` produces (for what deploy/ uses)."""
    return copy.deepcopy(_rendered(directory.resolve()))


@cache
def _rendered(directory: Path) -> list[Obj]:
    spec = load_documents(directory / KUSTOMIZATION)[0]
    objects: list[Obj] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            objects.extend(copy.deepcopy(_rendered(target)))
        else:
            objects.extend(load_documents(target))
    for entry in spec.get("components") or []:
        objects = _apply_component((directory / entry).resolve(), objects)
    objects = _apply_patches(directory, spec, objects)
    return _apply_images(spec, objects)


def _apply_component(directory: Path, objects: list[Obj]) -> list[Obj]:
    spec = load_documents(directory / KUSTOMIZATION)[0]
    if spec.get("kind") != "Component":
        raise ValueError(f"{directory} is listed under components but is a {spec.get('kind')}")
    for entry in spec.get("resources") or []:
        objects = [*objects, *load_documents((directory / entry).resolve())]
    return _apply_patches(directory, spec, objects)


def _apply_patches(directory: Path, spec: Obj, objects: list[Obj]) -> list[Obj]:
    for patch in spec.get("patches") or []:
        if "path" in patch:
            documents = load_documents((directory / patch["path"]).resolve())
        else:
            documents = [yaml.safe_load(patch["patch"])]
        for document in documents:
            if isinstance(document, list):
                target = patch.get("target") or {}
                hits = [i for i, obj in enumerate(objects) if _matches(obj, target)]
                if not hits:
                    raise ValueError(f"patch target {target} matches nothing")
                for index in hits:
                    objects[index] = json_patch(objects[index], document)
                continue
            objects = _strategic_patch(objects, document)
    return objects


def _strategic_patch(objects: list[Obj], document: Obj) -> list[Obj]:
    key = object_key({k: v for k, v in document.items() if k != "$patch"})
    hits = [i for i, obj in enumerate(objects) if object_key(obj) == key]
    if len(hits) != 1:
        raise ValueError(f"patch for {key} matches {len(hits)} objects")
    if document.get("$patch") == "delete":
        return [obj for i, obj in enumerate(objects) if i != hits[0]]
    objects = list(objects)
    objects[hits[0]] = strategic_merge(objects[hits[0]], document)
    return objects


def _apply_images(spec: Obj, objects: list[Obj]) -> list[Obj]:
    images = {entry["name"]: entry for entry in spec.get("images") or []}
    if not images:
        return objects
    result = []
    for obj in objects:
        obj = copy.deepcopy(obj)
        for container in pod_containers(obj):
            name, _, _tag = container["image"].partition(":")
            if name in images:
                entry = images[name]
                new_name = entry.get("newName", name)
                new_tag = entry.get("newTag", _tag)
                container["image"] = f"{new_name}:{new_tag}" if new_tag else new_name
        result.append(obj)
    return result


# --- reading objects ------------------------------------------------------------------


def pod_spec(obj: Obj) -> Obj | None:
    template = (obj.get("spec") or {}).get("template")
    return None if template is None else template.get("spec")


def pod_containers(obj: Obj) -> list[Obj]:
    spec = pod_spec(obj)
    if spec is None:
        return []
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objects if o.get("kind") == kind and o["metadata"]["name"] == name]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} {kind} named {name!r}")
    return hits[0]


def container(obj: Obj, name: str) -> Obj:
    hits = [c for c in pod_containers(obj) if c["name"] == name]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} containers named {name!r}")
    return hits[0]


def env_values(container_spec: Obj) -> dict[str, str]:
    """Literal env values of a container (valueFrom entries are left out)."""
    return {e["name"]: e["value"] for e in container_spec.get("env") or [] if "value" in e}


def volume_for_mount(obj: Obj, mount_name: str) -> Obj:
    spec = pod_spec(obj) or {}
    hits = [v for v in spec.get("volumes") or [] if v["name"] == mount_name]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} volumes named {mount_name!r}")
    return hits[0]


def scheduler_config(objects: list[Obj]) -> Obj:
    """The KubeSchedulerConfiguration inside its ConfigMap."""
    config_map = find(objects, "ConfigMap", "vgpu-scheduler-config")
    return yaml.safe_load(config_map["data"]["config.yaml"])


def normalised(objects: list[Obj]) -> list[str]:
    """Objects as canonical JSON, order-free (named lists sorted by name)."""

    def canon(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: canon(v) for k, v in value.items()}
        if isinstance(value, list):
            items = [canon(v) for v in value]
            if _named_list(items):
                items.sort(key=lambda item: str(item["name"]))
            return items
        return value

    return sorted(json.dumps(canon(o), sort_keys=True) for o in objects)
