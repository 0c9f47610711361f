"""The command line: settings errors name the setting (its variable and flag) in one
line; migrate brings the schema up."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu_extender import store
from vgpu_extender.cli import app


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--node-policy", "nope"], "error: VGPU_NODE_POLICY (--node-policy): "),
        (["serve", "--port", "70000"], "error: VGPU_PORT (--port): "),
        (["serve", "--inventory", "/does/not/exist.yaml"], "VGPU_INVENTORY_FILE (--inventory)"),
        (["migrate", "--database-url", "mysql://x/y"], "VGPU_DATABASE_URL (--database-url)"),
        (["serve", "--database-url", "mysql://x/y"], "unsupported database driver"),
    ],
    ids=[
        "unknown-policy",
        "port-range",
        "missing-inventory",
        "migrate-bad-driver",
        "serve-bad-driver",
    ],
)
def test_bad_settings_exit_with_the_field_named(argv: list[str], message: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.splitlines()) == 1, result.output


def test_migrate_creates_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    result = CliRunner().invoke(app, ["migrate", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert store.schema_revision(url) == store.head_revision()
    assert store.head_revision() in result.output


def test_a_pool_smaller_than_the_bind_workers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_BIND_WORKERS", "64")
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "database_pool_size (40) must be at least bind_workers (64)" in result.output
    assert "VGPU_DATABASE_POOL_SIZE, VGPU_BIND_WORKERS" in result.output
