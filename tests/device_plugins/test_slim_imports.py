"""The node agent needs none of the extender's frameworks, so its image can leave them out.

Each check runs in a fresh interpreter: this test process has them all loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: The extender's web, database, numeric and fast-JSON stacks.
FRAMEWORKS = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "numpy", "msgspec")
AGENT_MODULES = ("device_plugins.cli", "device_plugins.agent", "device_plugins.__main__")


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def loaded_roots() -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {AGENT_MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    result = python(code)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout))


@pytest.fixture(scope="module")
def roots() -> set[str]:
    return loaded_roots()


@pytest.mark.parametrize(
    "module",
    FRAMEWORKS,
)
def test_the_agent_does_not_import(roots: set[str], module: str) -> None:
    assert "device_plugins" in roots  # the probe itself worked
    assert module not in roots


def test_the_agent_runs_where_the_frameworks_are_not_installed(tmp_path: Path) -> None:
    """An import hook refuses them, as a slim image would; a dry run still works."""
    devices = tmp_path / "devices.yaml"
    devices.write_text(
        "devices:\n  - {uuid: GPU-1, index: 0, model: Tesla T4, memory_mib: 15360}\n"
    )
    code = (
        "import sys\n"
        "from importlib.abc import MetaPathFinder\n"
        f"REFUSED = {FRAMEWORKS!r}\n"
        "class Refuse(MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in REFUSED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import device_plugins.agent, device_plugins.metrics, device_plugins.status_server\n"
        "from device_plugins.cli import main\n"
        "sys.argv = ['vgpu-device-plugin', *sys.argv[1:]]\n"
        "main()\n"
    )
    result = python(code, "--dry-run", "--discovery", "static", "--static-file", str(devices))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("backend static: 1 device(s)\n")
