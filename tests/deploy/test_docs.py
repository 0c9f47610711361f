"""docs/deploy.md says what the repository does: paths, commands, settings, examples."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.app_surface import device_plugin_settings_class, extender_settings_class
from tests.deploy.manifests import BASE, ROOT, buildable_dirs, render, scheduler_config

DOC = ROOT / "docs" / "deploy.md"
TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", TEXT, flags=re.S)
YAML_BLOCKS = [yaml.safe_load(body) for lang, body in BLOCKS if lang == "yaml"]


def test_mentioned_repository_paths_exist() -> None:
    paths = set(re.findall(r"(?<![\w/.])((?:deploy|docs)/[\w./-]*[\w/])", TEXT))
    assert "deploy/base" in {p.rstrip("/") for p in paths}
    for path in sorted(paths):
        assert (ROOT / path).exists(), f"docs name {path}, which does not exist"


def test_apply_commands_name_real_kustomizations() -> None:
    kustomizations = {str(d.relative_to(ROOT)) for d in buildable_dirs()}
    applied = re.findall(r"kubectl apply -k (\S+)", TEXT)
    assert set(applied) == kustomizations
    for path in re.findall(r"kubectl apply -f (\S+)", TEXT):
        assert (ROOT / path).is_file()


def _setting_rows() -> list[tuple[str, str]]:
    return re.findall(r"^\| `(VGPU_[A-Z_]+)` \| `?([^`|]+?)`? \|", TEXT, flags=re.M)


def _settings_for(variable: str) -> tuple[Any, str]:
    cls = device_plugin_settings_class() if variable.startswith("VGPU_DP_") else None
    cls = cls or extender_settings_class()
    prefix = str(cls.model_config["env_prefix"])
    return cls, variable[len(prefix) :].lower()


def test_every_variable_named_is_a_setting() -> None:
    variables = set(re.findall(r"\b(VGPU_[A-Z_]+[A-Z])\b", TEXT))
    assert "VGPU_DP_SPLIT_COUNT" in variables
    for variable in sorted(variables):
        cls, field = _settings_for(variable)
        assert field in cls.model_fields, f"{variable} is not a setting of {cls.__name__}"


def _same(documented: str, actual: Any) -> bool:
    if documented == "unset":
        return actual is None
    if isinstance(actual, bool):
        return documented == str(actual).lower()
    if isinstance(actual, int | float):
        return float(documented) == float(actual)
    if isinstance(actual, dict):
        return yaml.safe_load(documented) == actual
    return documented == str(actual)


@pytest.mark.parametrize(("variable", "documented"), _setting_rows())
def test_settings_table_states_the_defaults(variable: str, documented: str) -> None:
    cls, field = _settings_for(variable)
    default = cls.model_fields[field].get_default(call_default_factory=True)
    assert _same(documented, default), f"{variable}: docs say {documented}, code has {default!r}"


def test_example_pod_is_valid_and_asks_for_managed_resources() -> None:
    pods = [doc for doc in YAML_BLOCKS if isinstance(doc, dict) and doc.get("kind") == "Pod"]
    assert pods
    managed = {
        m["name"] for m in scheduler_config(render(BASE))["extenders"][0]["managedResources"]
    }
    for pod in pods:
        kubernetes_validate.validate(pod, "1.33.0", strict=True)
        names = {
            name
            for c in pod["spec"]["containers"]
            for name in (c.get("resources") or {}).get("limits", {})
        }
        assert names and names <= managed


def test_example_overlay_renames_the_images_base_uses() -> None:
    overlays = [d for d in YAML_BLOCKS if isinstance(d, dict) and d.get("kind") == "Kustomization"]
    assert len(overlays) == 1
    named = {image["name"] for image in overlays[0]["images"]}
    base = yaml.safe_load((BASE / "kustomization.yaml").read_text(encoding="utf-8"))
    assert named == {image["name"] for image in base["images"]}
