"""The real ``vgpu-extender serve``, started as an operator would, with what it cannot
start with: each failure is one line naming the setting (variable and flag), the value
and what to do, exit status 2, no traceback (unless at debug), no secret.

The contract on stderr: log lines may come first; the last line is the error, it is
the only line starting ``error: ``, and there is no ``Traceback``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import free_port, spawn_extender
from vgpu_extender import store

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pg-s3cret-do-not-show"
TOKEN = "admin-token-do-not-show"


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error: ")]

    @property
    def line(self) -> str:
        """The one error line, after checking the contract."""
        lines = self.stderr.splitlines()
        assert self.code == 2, self.stderr
        assert len(self.errors) == 1, self.stderr
        assert lines and lines[-1] == self.errors[0], self.stderr
        assert "Traceback" not in self.stderr, self.stderr
        return self.errors[0]


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Outcome:
    """``python -m vgpu_extender.cli serve`` in ``tmp_path``, standalone, with a token
    set (it must never show), until it exits (a minute at most)."""
    full_env = {key: value for key, value in os.environ.items() if not key.startswith("VGPU_")} | {
        "PYTHONPATH": str(ROOT),
        "VGPU_KUBE_MODE": "off",
        "VGPU_ADMIN_TOKEN": TOKEN,
        "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}",
        **(env or {}),
    }
    command = [sys.executable, "-m", "vgpu_extender.cli", "serve", "--port", "0", *args]
    done = subprocess.run(
        command, cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=60
    )
    outcome = Outcome(done.returncode, done.stdout, done.stderr)
    assert TOKEN not in outcome.stderr + outcome.stdout
    return outcome


def test_a_corrupt_inventory_file_is_one_line(tmp_path: Path) -> None:
    inventory = tmp_path / "nodes.json"
    inventory.write_text('{"nodes": [{"name": "n1", "devices": [', encoding="utf-8")
    line = serve(tmp_path, "--inventory", str(inventory)).line
    assert line.startswith("error: VGPU_INVENTORY_FILE (--inventory): ")
    assert "nodes.json" in line and "not JSON or YAML" in line
    assert "fix the file" in line


def test_an_inventory_file_with_a_bad_node_is_one_line(tmp_path: Path) -> None:
    inventory = tmp_path / "nodes.json"
    inventory.write_text('{"nodes": [{"devices": []}]}', encoding="utf-8")
    line = serve(tmp_path, "--inventory", str(inventory)).line
    assert line.startswith("error: VGPU_INVENTORY_FILE (--inventory): ")
    assert "nodes[0]" in line


def test_a_missing_inventory_file_is_one_line(tmp_path: Path) -> None:
    line = serve(tmp_path, env={"VGPU_INVENTORY_FILE": str(tmp_path / "gone.yaml")}).line
    assert line.startswith("error: VGPU_INVENTORY_FILE (--inventory): no such file")
    assert "gone.yaml" in line


def test_a_postgresql_that_is_down_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://vgpu:{PASSWORD}@127.0.0.1:{free_port()}/vgpu"
    outcome = serve(
        tmp_path,
        env={"VGPU_DATABASE_URL": url, "VGPU_DATABASE_STARTUP_TIMEOUT_S": "2"},
    )
    line = outcome.line
    assert line.startswith("error: VGPU_DATABASE_URL (--database-url): ")
    assert "cannot be reached" in line and "tries in 2 s" in line
    assert "vgpu:***@127.0.0.1" in line
    assert "start the database" in line
    assert PASSWORD not in outcome.stderr + outcome.stdout
    # The retries: the same refusal logged once, however many tries.
    assert outcome.stderr.count("store not reachable yet") == 1, outcome.stderr


def test_a_read_only_sqlite_database_is_one_line(tmp_path: Path) -> None:
    """Read-only as SQLite sees it (``mode=ro``): file permissions do not bind root,
    which the suite may run as."""
    database = tmp_path / "ro.db"
    store.migrate(f"sqlite:///{database}")
    url = f"sqlite:///file:{database}?mode=ro&uri=true"
    line = serve(tmp_path, env={"VGPU_DATABASE_URL": url}).line
    assert line.startswith("error: VGPU_DATABASE_URL (--database-url): ")
    assert "cannot be written" in line and "readonly database" in line
    assert "writable" in line


def test_vendor_options_that_are_not_json_are_one_line(tmp_path: Path) -> None:
    line = serve(tmp_path, env={"VGPU_VENDOR_OPTIONS": "notjson"}).line
    assert line.startswith("error: VGPU_VENDOR_OPTIONS: not valid JSON")
    assert "give a JSON object" in line


def test_vendor_options_the_vendor_refuses_are_one_line(tmp_path: Path) -> None:
    line = serve(tmp_path, env={"VGPU_VENDOR_OPTIONS": '{"split_count": "many"}'}).line
    assert line.startswith("error: VGPU_VENDOR, VGPU_VENDOR_OPTIONS: ")


def test_a_bad_integer_is_one_line(tmp_path: Path) -> None:
    line = serve(tmp_path, env={"VGPU_BIND_WORKERS": "eight"}).line
    assert line == (
        "error: VGPU_BIND_WORKERS: Input should be a valid integer, unable to parse "
        "string as an integer (got 'eight'); give a whole number"
    )


def test_a_bad_flag_value_names_the_flag(tmp_path: Path) -> None:
    line = serve(tmp_path, "--node-policy", "nope").line
    assert line.startswith("error: VGPU_NODE_POLICY (--node-policy): unknown policy 'nope'")


@pytest.mark.parametrize(
    ("flag", "setting"),
    [
        ("--node-scheduler-policy=nope", "VGPU_NODE_POLICY (--node-policy)"),
        ("--gpu-scheduler-policy=nope", "VGPU_DEVICE_POLICY (--device-policy)"),
    ],
    ids=["node", "gpu"],
)
def test_hamis_policy_flags_set_the_policies(tmp_path: Path, flag: str, setting: str) -> None:
    """HAMi's scheduler flags, as its chart passes them, are the same settings."""
    line = serve(tmp_path, flag).line
    assert line.startswith(f"error: {setting}: unknown policy 'nope'"), line


@pytest.mark.parametrize("where", ["flag", "env"])
def test_a_bad_log_level_is_one_line(tmp_path: Path, where: str) -> None:
    if where == "flag":
        outcome = serve(tmp_path, "--log-level", "loud")
    else:
        outcome = serve(tmp_path, env={"VGPU_LOG_LEVEL": "loud"})
    line = outcome.line
    assert line.startswith("error: VGPU_LOG_LEVEL (--log-level): ")
    assert "(got 'loud')" in line


def test_a_bad_database_url_hides_its_password(tmp_path: Path) -> None:
    url = f"mysql://vgpu:{PASSWORD}@db/vgpu"
    outcome = serve(tmp_path, "--database-url", url)
    assert outcome.line.startswith("error: VGPU_DATABASE_URL (--database-url): ")
    assert PASSWORD not in outcome.stderr


def test_debug_shows_the_traceback_then_the_line(tmp_path: Path) -> None:
    inventory = tmp_path / "nodes.json"
    inventory.write_text("{", encoding="utf-8")
    outcome = serve(tmp_path, "--inventory", str(inventory), "--log-level", "DEBUG")
    assert outcome.code == 2
    assert "Traceback (most recent call last)" in outcome.stderr
    assert outcome.stderr.splitlines()[-1].startswith("error: VGPU_INVENTORY_FILE (--inventory)")


def test_debug_in_any_case_from_the_environment(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://vgpu:{PASSWORD}@127.0.0.1:{free_port()}/vgpu"
    outcome = serve(
        tmp_path,
        env={
            "VGPU_DATABASE_URL": url,
            "VGPU_DATABASE_STARTUP_TIMEOUT_S": "0",
            "VGPU_LOG_LEVEL": "debug",
        },
    )
    assert outcome.code == 2
    assert "Traceback (most recent call last)" in outcome.stderr
    assert "StoreUnavailable" in outcome.stderr
    assert PASSWORD not in outcome.stderr


def test_a_misspelt_variable_is_warned_with_the_closest_setting(tmp_path: Path) -> None:
    # The start fails on purpose (a bad setting), after the warning.
    outcome = serve(tmp_path, env={"VGPU_DATABSE_URL": "sqlite:///x.db", "VGPU_BIND_WORKERS": "x"})
    warnings = [line for line in outcome.stderr.splitlines() if "VGPU_DATABSE_URL" in line]
    assert len(warnings) == 1, outcome.stderr
    assert "WARNING" in warnings[0]
    assert "is not a setting and is ignored; did you mean VGPU_DATABASE_URL?" in warnings[0]
    assert outcome.line.startswith("error: VGPU_BIND_WORKERS: ")


def test_json_logs_are_one_object_per_line_ours_and_uvicorns(tmp_path: Path) -> None:
    log = tmp_path / "extender.log"
    process = spawn_extender(
        env={
            "VGPU_KUBE_MODE": "off",
            "VGPU_DEMO": "true",
            "VGPU_LOG_FORMAT": "JSON",
            "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}",
            "VGPU_UNKNOWN_THING": "1",
        },
        log=log,
    )
    process.stop()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    loggers = {entry["logger"] for entry in entries}
    assert "uvicorn.error" in loggers
    assert any(name.startswith("vgpu_extender") for name in loggers)
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys()
    assert any("VGPU_UNKNOWN_THING is not a setting" in entry["message"] for entry in entries)
    assert any(entry["message"] == "Application startup complete." for entry in entries)


def test_a_failing_start_in_json_keeps_the_error_line_plain(tmp_path: Path) -> None:
    """The error line is for the operator, not the log collector: plain, and last."""
    outcome = serve(
        tmp_path, "--log-format", "json", env={"VGPU_INVENTORY_FILE": str(tmp_path / "x")}
    )
    assert outcome.line.startswith("error: VGPU_INVENTORY_FILE")
    for line in outcome.stderr.splitlines()[:-1]:
        json.loads(line)


def test_the_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command_env = {"VGPU_PORT": str(port)}
        done = subprocess.run(
            [sys.executable, "-m", "vgpu_extender.cli", "serve", "--standalone"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT), **command_env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    outcome = Outcome(done.returncode, done.stdout, done.stderr)
    assert outcome.line.startswith(
        "error: VGPU_PORT (--port), VGPU_ADMIN_PORT, VGPU_METRICS_PORT: cannot listen"
    )
    assert str(port) in outcome.line


def test_a_kubeconfig_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [oops", encoding="utf-8")
    line = serve(tmp_path, "--kubeconfig", str(kubeconfig), env={"VGPU_KUBE_MODE": "auto"}).line
    assert line.startswith("error: VGPU_KUBECONFIG (--kubeconfig): cannot load the Kubernetes")
    assert "--standalone" in line
