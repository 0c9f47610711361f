"""``vgpu-extender`` without the extender extra: one line naming the install, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vgpu_extender import requirements_check

INSTALL = "pip install 'vgpu-extender[extender]'"


def test_with_the_extra_installed_nothing_is_missing() -> None:
    assert requirements_check.missing_extender_packages() == []
    requirements_check.require_extender()  # returns


def test_a_missing_package_is_named_with_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)  # what an absent package looks like
    monkeypatch.setitem(sys.modules, "numpy", None)
    assert requirements_check.missing_extender_packages() == ["fastapi", "numpy"]
    with pytest.raises(SystemExit) as raised:
        requirements_check.require_extender()
    message = str(raised.value.code)
    assert message == (
        "vgpu-extender needs the extender extra (missing: fastapi, numpy): " + INSTALL
    )


# Hides the extender's packages, then runs the console script's function.
_WITHOUT_EXTRA = """
import sys
for name in ("fastapi", "sqlalchemy", "numpy"):
    sys.modules[name] = None
sys.argv = ["vgpu-extender", "--help"]
from vgpu_extender.requirements_check import main
main()
"""


def test_the_command_fails_with_one_line_before_the_cli_loads() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRA], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "vgpu-extender needs the extender extra (missing: fastapi, sqlalchemy, numpy): " + INSTALL
    ]


def test_the_console_script_module_exposes_the_cli_app() -> None:
    from vgpu_extender.cli import app

    assert requirements_check.app is app
    with pytest.raises(AttributeError):
        _ = requirements_check.nothing_here  # type: ignore[attr-defined]
