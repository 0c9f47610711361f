"""The command line's surface: fast to load (nothing heavy before a command runs),
``--version`` everywhere, help with defaults and without type tags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vgpu_extender import cli
from vgpu_extender.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "kubernetes", "httpx")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vgpu_extender.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_imports_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "from vgpu_extender.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", [[], ["serve"], ["migrate"], ["inspect"], ["simulate"]])
def test_every_command_has_version(command: list[str]) -> None:
    done = _run(*command, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"vgpu-extender {cli.package_version()}")


@pytest.mark.parametrize("command", ["serve", "migrate", "inspect", "simulate"])
def test_help_shows_no_type_tags(command: str) -> None:
    done = _run(command, "--help")
    assert done.returncode == 0, done.stderr
    for tag in ("TEXT", "INTEGER", "PATH", "FLOAT", "BOOLEAN", "<str>", "<int>", "<bool>"):
        assert tag not in done.stdout, done.stdout


def test_serve_help_shows_the_defaults_and_the_variables() -> None:
    text = " ".join(_run("serve", "--help").stdout.split())
    assert "[env: VGPU_PORT] [default: 8888]" in text
    assert "[env: VGPU_DATABASE_URL] [default: sqlite:///vgpu-extender.db]" in text
    assert "[default: info]" in text


def test_the_defaults_shown_are_the_settings_defaults() -> None:
    fields = Settings.model_fields
    for name, shown in cli.SHOWN_DEFAULTS.items():
        assert str(fields[name].default).lower() == shown.lower(), name


def test_every_serve_flag_names_a_setting() -> None:
    assert set(cli.SERVE_FLAGS) <= set(Settings.model_fields)
