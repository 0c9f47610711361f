"""No secret is ever printed: settings errors, store errors and the start-up log show
a database URL with its password hidden, and never the admin token."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import SecretBytes, SecretStr, ValidationError
from typer.testing import CliRunner

from tests.support.server import free_port, spawn_extender
from vgpu_extender.cli import app
from vgpu_extender.redaction import RedactingFormatter, hide_passwords, shown_url
from vgpu_extender.settings import Settings
from vgpu_extender.startup_errors import SECRET_FIELDS, StartupError, from_validation

PASSWORD = "S3cretPW-audit"
TOKEN = "T0ken-never-shown"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"got 'postgresql+psycopg2://vgpu:{PASSWORD}@db:5432/vgpu'",
            "got 'postgresql+psycopg2://vgpu:***@db:5432/vgpu'",
        ),
        (f"postgresql://vgpu:p@{PASSWORD}@h1,h2/db", "postgresql://vgpu:***@h1,h2/db"),
        (
            f"postgresql://vgpu@db/x?password={PASSWORD}&a=b",
            "postgresql://vgpu@db/x?password=***&a=b",
        ),
        (f"host=db password={PASSWORD} user=vgpu", "host=db password=*** user=vgpu"),
        ("sqlite:///var/lib/vgpu.db", "sqlite:///var/lib/vgpu.db"),
        ("postgresql+psycopg://vgpu@db/vgpu", "postgresql+psycopg://vgpu@db/vgpu"),
    ],
    ids=["userinfo", "at-in-password", "query", "keywords", "sqlite", "no-password"],
)
def test_passwords_are_hidden_in_any_text(text: str, shown: str) -> None:
    assert hide_passwords(text) == shown


def test_a_url_shown_keeps_all_but_its_password() -> None:
    url = f"postgresql+psycopg://vgpu:{PASSWORD}@db:5432/vgpu?sslmode=require"
    assert shown_url(url) == "postgresql+psycopg://vgpu:***@db:5432/vgpu?sslmode=require"


def _settings_error(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Settings(**values)  # type: ignore[arg-type]
    return caught.value


def _lines(error: ValidationError) -> str:
    """The start-up error lines the CLI prints for ``error``."""
    return "\n".join(e.line() for e in from_validation(error, list(Settings.model_fields)))


def _typed_secret(annotation: object) -> bool:
    if annotation in (SecretStr, SecretBytes):
        return True
    return any(_typed_secret(arg) for arg in get_args(annotation))


def test_a_settings_error_printed_as_is_carries_no_password() -> None:
    error = _settings_error(database_url=f"postgresql+psycopg2://vgpu:{PASSWORD}@db/vgpu")
    assert "unsupported database driver 'postgresql+psycopg2'" in str(error)
    assert PASSWORD not in str(error)
    assert PASSWORD not in _lines(error)


def test_a_secret_settings_value_is_never_described() -> None:
    # Every setting typed as a secret is one the start-up errors never show.
    typed = {name for name, f in Settings.model_fields.items() if _typed_secret(f.annotation)}
    assert typed == SECRET_FIELDS
    error = _settings_error(admin_token=TOKEN, port=-1, database_url="sqlite:///x.db")
    # A secret that fails validation itself is named, never shown.
    with pytest.raises(ValidationError) as caught:
        Settings(admin_token=[TOKEN])  # type: ignore[arg-type]
    described = _lines(caught.value)
    assert described.startswith("error: VGPU_ADMIN_TOKEN: ")
    assert TOKEN not in described and TOKEN not in _lines(error)
    # Given a value, the line shows it as ***.
    line = StartupError("too short", fields=("admin_token",), value=TOKEN).line()
    assert "(got ***)" in line and TOKEN not in line


@pytest.mark.parametrize("command", ["serve", "migrate", "inspect"])
def test_the_cli_shows_a_bad_url_without_its_password(command: str) -> None:
    url = f"postgresql+psycopg2://vgpu:{PASSWORD}@db/vgpu"
    result = CliRunner().invoke(app, [command], env={"VGPU_DATABASE_URL": url})
    assert result.exit_code == 2
    assert "database_url" in result.stderr
    assert "postgresql+psycopg2://vgpu:***@db/vgpu" in result.stderr
    assert PASSWORD not in result.output


def test_migrate_against_an_unreachable_store_shows_no_password() -> None:
    url = f"postgresql+psycopg://vgpu:{PASSWORD}@127.0.0.1:{free_port()}/vgpu?connect_timeout=2"
    result = CliRunner().invoke(app, ["migrate"], env={"VGPU_DATABASE_URL": url})
    assert result.exit_code == 1
    assert "migrate failed" in result.stderr
    assert PASSWORD not in result.output


def test_log_records_are_formatted_without_passwords() -> None:
    formatter = RedactingFormatter(logging.Formatter("%(levelname)s %(message)s"))
    try:
        raise RuntimeError(f"cannot connect to postgresql://vgpu:{PASSWORD}@db/vgpu")
    except RuntimeError:
        record = logging.LogRecord(
            "x",
            logging.ERROR,
            __file__,
            1,
            "store %s",
            (f"postgresql://u:{PASSWORD}@h/d",),
            sys.exc_info(),
        )
    text = formatter.format(record)
    assert text.startswith("ERROR store postgresql://u:***@h/d")
    assert "RuntimeError: cannot connect to postgresql://vgpu:***@db/vgpu" in text
    assert PASSWORD not in text


def test_serve_logs_its_store_without_the_password_or_the_token(tmp_path: Path) -> None:
    """The real command, failing to reach its store: its whole output is checked."""
    url = f"postgresql+psycopg://vgpu:{PASSWORD}@127.0.0.1:{free_port()}/vgpu?connect_timeout=2"
    log = tmp_path / "extender.log"
    process = spawn_extender(
        env={
            "VGPU_DATABASE_URL": url,
            # The database is down on purpose: one retry window, not the default 30 s.
            "VGPU_DATABASE_STARTUP_TIMEOUT_S": "2",
            "VGPU_KUBE_MODE": "off",
            "VGPU_ADMIN_TOKEN": TOKEN,
            "VGPU_LOG_LEVEL": "DEBUG",
        },
        log=log,
        wait=False,
    )
    try:
        process.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve kept running without its store:\n{log.read_text()}")
    finally:
        process.stop()
    text = log.read_text()
    assert "store: postgresql+psycopg://vgpu:***@127.0.0.1:" in text
    assert PASSWORD not in text and TOKEN not in text


def test_a_store_error_for_an_unreadable_url_carries_no_password() -> None:
    from vgpu_extender import store

    with pytest.raises(store.StoreInputError) as caught:
        store.make_engine(f"postgresql+psycopg://vgpu:{PASSWORD}@db:notaport/vgpu")
    assert "not a database URL" in str(caught.value)
    assert PASSWORD not in str(caught.value)
