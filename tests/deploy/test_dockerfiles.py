"""The Dockerfiles: multi-stage, slim, non-root, running the console scripts."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.app_surface import console_scripts, pyproject
from tests.deploy.dockerfiles import dockerfile
from tests.deploy.manifests import BASE, DOCKER, ROOT, container, find, render

COMPONENTS = {"extender": "vgpu-extender", "device-plugin": "vgpu-device-plugin"}


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_multi_stage_on_a_slim_python(component: str) -> None:
    parsed = dockerfile(component)
    assert len(parsed.stages) >= 2
    assert parsed.stages[0].name, "the build stage is named"
    for stage in parsed.stages:
        assert stage.image.startswith("python:3.11-slim"), stage.image
    final = parsed.stages[-1]
    copied_from = [v for k, v in final.instructions if k == "COPY" and "--from=" in v]
    assert copied_from, "the final stage copies the installed environment"
    assert not [v for k, v in final.instructions if k == "RUN" and "pip install" in v]


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_runs_as_a_numeric_non_root_user(component: str) -> None:
    user = dockerfile(component).user
    assert user is not None
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) > 0


@pytest.mark.parametrize(("component", "script"), list(COMPONENTS.items()))
def test_entrypoint_is_the_console_script(component: str, script: str) -> None:
    assert dockerfile(component).entrypoint == [script]
    assert script in console_scripts()


def test_pod_user_is_the_image_user() -> None:
    deployment = find(render(BASE), "Deployment", "vgpu-scheduler")
    uid = int(dockerfile("extender").user.split(":")[0])
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_device_plugin_root_is_explicit_and_unprivileged() -> None:
    daemonset = find(render(BASE), "DaemonSet", "vgpu-device-plugin")
    context = container(daemonset, "device-plugin")["securityContext"]
    assert context["runAsUser"] == 0 and context["runAsNonRoot"] is False
    assert context["privileged"] is False
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]


def _ignored(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins, ``!`` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            ignored = not negate
    return ignored


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_build_context_holds_what_the_package_needs(component: str) -> None:
    ignore = DOCKER / f"Dockerfile.{component}.dockerignore"
    patterns = [
        line.strip()
        for line in ignore.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [s for group in dockerfile(component).copies() for s in group]
    packages = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in packages:
        assert package.rstrip("*") in sources, f"{package} is not copied"
    readme = pyproject()["project"]["readme"]
    for source in [*sources, readme, "pyproject.toml"]:
        if "*" in source:
            continue
        assert (ROOT / source).exists(), f"{source} is copied but missing"
        assert not _ignored(patterns, source), f"{source} is excluded by {ignore.name}"
    assert _ignored(patterns, "tests/unit/test_x.py")
    assert _ignored(patterns, ".venv/bin/python")


#: Per image, the constraints file and what it installs from the repository.
SIDES = {"extender": ("extender", ".[extender]"), "device-plugin": ("node-agent", ".")}
#: What only the extender needs: never in the node agent's image.
EXTENDER_ONLY = {"fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "numpy", "psycopg"}


def _pins(side: str) -> dict[str, str]:
    """Name -> version of a constraints file; every line must be ``name==version``."""
    pins = {}
    for line in (ROOT / "requirements" / f"{side}.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, separator, version = line.partition("==")
        assert separator and version and "[" not in name and ";" not in line, line
        pins[canonicalize_name(name)] = version
    return pins


@pytest.mark.parametrize("component", list(SIDES))
def test_the_image_installs_pinned_by_its_constraints_file(component: str) -> None:
    side, target = SIDES[component]
    parsed = dockerfile(component)
    (install,) = parsed.pip_installs()
    assert install.constraints == [f"requirements/{side}.txt"]
    assert install.targets == [target]
    copied = [s for group in parsed.copies() for s in group]
    assert f"requirements/{side}.txt" in copied, "the constraints file is copied in"
    assert _pins(side), "the constraints file pins something"


def test_the_node_agent_image_installs_no_extender_extra() -> None:
    (install,) = dockerfile("device-plugin").pip_installs()
    assert not [t for t in install.targets if "[" in t]
    assert not EXTENDER_ONLY & set(_pins("node-agent"))


def _requirement_names(texts: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(text).name) for text in texts}


def test_the_base_requirements_are_the_node_agents() -> None:
    base = _requirement_names(pyproject()["project"]["dependencies"])
    assert not EXTENDER_ONLY & base
    assert {"grpcio", "protobuf", "nvidia-ml-py", "kubernetes", "httpx"} <= base
    assert "msgspec" not in base  # the extender's fast JSON, not the agent's
    # What pip reads: the installed metadata's unconditional requirements.
    installed = [
        text for text in metadata.requires("vgpu-extender") or [] if "extra ==" not in text
    ]
    assert _requirement_names(installed) == base


def test_the_extender_extra_brings_what_the_extender_imports() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    assert {"fastapi", "sqlalchemy", "numpy", "uvicorn", "alembic"} <= _requirement_names(
        extras["extender"]
    )
    assert "vgpu-extender[extender]" in extras["test"], "the dev install is complete"


@pytest.mark.parametrize(("side", "extras"), [("node-agent", ()), ("extender", ("extender",))])
def test_every_direct_requirement_is_pinned(side: str, extras: tuple[str, ...]) -> None:
    project = pyproject()["project"]
    optional = project["optional-dependencies"]
    wanted = _requirement_names(
        [*project["dependencies"], *(r for extra in extras for r in optional[extra])]
    )
    assert wanted <= set(_pins(side)), wanted - set(_pins(side))


# Every node-agent module imported with the extender's packages hidden, as in its image.
_NODE_AGENT_ALONE = """
import importlib, pkgutil, sys
for name in sys.argv[1:]:
    sys.modules[name] = None
import device_plugins
for module in pkgutil.walk_packages(device_plugins.__path__, "device_plugins."):
    if module.name != "device_plugins.api.generate":  # a developer tool (grpcio-tools)
        importlib.import_module(module.name)
from device_plugins.cli import main
sys.argv = ["vgpu-device-plugin", "--help"]
main()
"""


def test_the_node_agent_runs_without_the_extender_extra() -> None:
    hidden = sorted(EXTENDER_ONLY | {"httpx", "swagger_ui_bundle", "httptools"})
    done = subprocess.run(
        [sys.executable, "-c", _NODE_AGENT_ALONE, *hidden],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: vgpu-device-plugin" in done.stdout
