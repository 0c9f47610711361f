"""Start-up errors as lines: the setting's variable and flag, the value (secrets and
passwords hidden), what to do; and the misspelt-variable finder."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from vgpu_extender.domain.errors import InventoryError
from vgpu_extender.settings import Settings
from vgpu_extender.startup_errors import (
    StartupError,
    describe,
    from_settings_error,
    from_validation,
    unknown_variables,
)
from vgpu_extender.store.errors import StoreError, StoreUnavailable

KNOWN = list(Settings.model_fields)


def _errors(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[StartupError]:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    return from_validation(caught.value, KNOWN)


def test_a_line_names_the_variable_the_flag_the_value_and_the_remedy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (error,) = _errors(monkeypatch, VGPU_PORT="http")
    assert error.with_flags({"port": "--port"}).line() == (
        "error: VGPU_PORT (--port): Input should be a valid integer, unable to parse "
        "string as an integer (got 'http'); give a whole number"
    )
    # Without a flag for the setting, the variable alone.
    assert error.line().startswith("error: VGPU_PORT: ")


def test_each_failing_setting_is_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    errors = _errors(monkeypatch, VGPU_PORT="x", VGPU_SPLIT_COUNT="0")
    assert [e.fields for e in errors] == [("port",), ("split_count",)]
    assert all("\n" not in e.line() for e in errors)


def test_a_check_across_settings_names_each_setting_it_mentions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (error,) = _errors(monkeypatch, VGPU_BIND_WORKERS="64")
    assert error.fields == ("database_pool_size", "bind_workers")
    assert error.line().startswith("error: VGPU_DATABASE_POOL_SIZE, VGPU_BIND_WORKERS: ")


def test_a_secret_value_is_never_shown() -> None:
    error = StartupError("too short", fields=("admin_token",), value="hunter2-token")
    assert "hunter2-token" not in error.line()
    assert "(got ***)" in error.line()


def test_a_password_in_any_part_of_the_line_is_hidden() -> None:
    error = StartupError(
        "cannot connect to postgresql://u:pa55@db/x",
        fields=("database_url",),
        value="postgresql://u:pa55@db/x",
    )
    assert "pa55" not in error.line()
    assert error.line().count("u:***@db") == 2


def test_a_long_password_is_hidden_before_the_value_is_cut() -> None:
    """A password longer than the shown part of the value (an IAM token, say): the cut
    would fall inside it and leave nothing the redaction recognises."""
    password = "S3cr" * 60
    error = StartupError(
        "bad", fields=("database_url",), value=f"postgresql+psycopg://u:{password}@h/db"
    )
    line = error.line()
    assert "S3crS3cr" not in line
    assert "postgresql+psycopg://u:***@h/db" in line


def test_a_message_of_several_lines_becomes_one() -> None:
    error = StartupError("not YAML:\n  line 2\n  ^", fields=("inventory_file",))
    assert error.line() == "error: VGPU_INVENTORY_FILE: not YAML: line 2 ^; " + (
        "fix the value, or unset it to get the default"
    )


def test_vendor_options_that_are_not_json_name_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VGPU_VENDOR_OPTIONS", "{oops")
    with pytest.raises(SettingsError) as caught:
        Settings()
    error = from_settings_error(caught.value)
    assert error.fields == ("vendor_options",)
    assert error.line().startswith("error: VGPU_VENDOR_OPTIONS: not valid JSON (")


@pytest.mark.parametrize(
    ("exc", "fields", "text"),
    [
        (InventoryError("inventory file 'x': no such file"), ("inventory_file",), "fix the file"),
        (StoreUnavailable("connection refused", operation="connect"), ("database_url",), "reached"),
        (StoreError("attempt to write a readonly database"), ("database_url",), "written"),
        (StoreError("relation missing"), ("database_url",), "refused"),
        (RuntimeError("boom"), (), "--log-level debug"),
    ],
    ids=["inventory", "unreachable", "read-only", "store", "other"],
)
def test_runtime_failures_name_the_setting_behind_them(
    exc: Exception, fields: tuple[str, ...], text: str
) -> None:
    error = describe(exc)
    assert error.fields == fields
    assert text in error.line()


def test_a_startup_error_describes_itself() -> None:
    error = StartupError("x", fields=("port",))
    assert describe(error) is error


def test_misspelt_variables_are_found_with_the_closest_setting() -> None:
    environ = {
        "VGPU_PROT": "1",
        "VGPU_DATABASE_URL": "sqlite://",
        "VGPU_LOGLEVEL": "debug",
        "VGPU_ZZZZZZZZZZZ": "1",
        "VGPU_DP_NODE_NAME": "n1",  # the node agent's
        "VGPU_TEST_POSTGRES_URL": "x",  # the test suite's
        "HOME": "/root",
    }
    assert unknown_variables(environ, KNOWN) == [
        ("VGPU_LOGLEVEL", "VGPU_LOG_LEVEL"),
        ("VGPU_PROT", "VGPU_PORT"),
        ("VGPU_ZZZZZZZZZZZ", None),
    ]
