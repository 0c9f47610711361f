"""``vgpu-extender inspect``: the same table and JSON from the store and from a server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.server import (
    RunningExtender,
    free_port,
    place,
    pod_json,
    standalone_settings,
    start_extender,
)
from vgpu_extender import store
from vgpu_extender.cli import app


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo with three pods placed; the tests read it from the store and over HTTP."""
    server = start_extender(standalone_settings(tmp_path_factory.mktemp("inspect"), demo=True))
    try:
        place(server, pod_json("train-0", namespace="ml", mem=20000, cores=50), "demo-a100-1")
        place(server, pod_json("infer-1", namespace="ml", mem=4000, cores=10), "demo-a100-1")
        place(server, pod_json("notebook", namespace="dev"), "demo-t4-1")
        yield server
    finally:
        server.stop()


def _source(running: RunningExtender, kind: str) -> list[str]:
    if kind == "store":
        return ["--database-url", running.runtime.settings.database_url]
    return ["--server", running.url]


def _inspect(*argv: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["inspect", *argv])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("kind", ["store", "server"])
def test_table_lists_every_gpu_with_its_use_and_pods(running: RunningExtender, kind: str) -> None:
    code, out, _ = _inspect(*_source(running, kind))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "NODE",
        "GPU",
        "TYPE",
        "MEMORY(MiB)",
        "CORES(%)",
        "PODS/SLOTS",
        "STATE",
        "PODS",
    ]
    rows = [line.split() for line in lines[1:13]]
    # Each GPU line ends with: memory, cores, pods/slots, state, pods; the first of a node
    # starts with the node's name.
    assert len(rows) == 12
    assert [r[0] for r in rows if r[0].startswith("demo-")] == [
        "demo-a100-1",
        "demo-a100-2",
        "demo-t4-1",
        "demo-t4-2",
    ]
    holders = sorted(r[-1] for r in rows if r[-1] != "-")
    assert holders == ["dev/notebook", "ml/infer-1", "ml/train-0"]
    notebook = next(r for r in rows if r[-1] == "dev/notebook")
    assert notebook[-5:] == ["15360/15360", "100/100", "1/10", "ok", "dev/notebook"]
    train = next(r for r in rows if r[-1] == "ml/train-0")
    assert train[-5:-2] == ["20000/81920", "50/100", "1/10"]
    assert lines[-2:] == [
        "Allocated/Total GPU memory: 39360/716800 MiB (5%), cores: 160/1200 (13%), "
        "GPUs: 12 on 4 node(s)",
        # demo-a100-1's two shared GPUs: (81920 - 20000) + (81920 - 4000) MiB.
        "Free memory on shared or full GPUs (fragmentation): 139840/677440 MiB (21%)",
    ]


@pytest.mark.parametrize("kind", ["store", "server"])
def test_one_node(running: RunningExtender, kind: str) -> None:
    code, out, _ = _inspect("demo-t4-1", *_source(running, kind))
    assert code == 0
    gpu_lines = out.splitlines()[1:3]
    assert gpu_lines[0].split()[:2] == ["demo-t4-1", "0"]
    assert gpu_lines[1].split()[:1] == ["1"]
    assert "GPUs: 2 on 1 node(s)" in out


@pytest.mark.parametrize("kind", ["store", "server"])
def test_json_is_the_admin_apis_node_list(running: RunningExtender, kind: str) -> None:
    code, out, _ = _inspect("--output", "json", *_source(running, kind))
    assert code == 0
    expected = running.client.get("/api/v1/nodes", params={"devices": "true"}).json()
    assert json.loads(out) == expected


@pytest.mark.parametrize("kind", ["store", "server"])
def test_an_unknown_node_is_an_error_naming_it(running: RunningExtender, kind: str) -> None:
    code, out, err = _inspect("ghost", *_source(running, kind))
    assert (code, out) == (1, "")
    assert err.strip() == "inspect: node 'ghost' is not registered"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--server", f"http://127.0.0.1:{free_port()}"], 1, "cannot reach the extender"),
        (["--database-url", "sqlite:///{tmp}/empty.db"], 1, "holds no vgpu-extender schema"),
        (["--database-url", "mysql://x/y"], 2, "unsupported database driver"),
        (["--output", "yaml"], 2, "'yaml' is not one of"),
    ],
    ids=["server-down", "unmigrated-store", "bad-driver", "bad-output"],
)
def test_bad_sources_exit_with_a_clear_message(
    tmp_path: Path, argv: list[str], code: int, message: str
) -> None:
    result = CliRunner().invoke(app, ["inspect", *(a.format(tmp=tmp_path) for a in argv)])
    assert result.exit_code == code
    assert message in result.output


def test_reading_the_store_changes_nothing(running: RunningExtender) -> None:
    url = running.runtime.settings.database_url
    before = store.schema_revision(url)
    _inspect("--database-url", url)
    assert store.schema_revision(url) == before
    assert running.client.get("/api/v1/summary").json()["pods"] == 3


# --------------------------------------------------------------------------- token
TOKEN = "inspect-Token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo with an admin token configured: its reads need the token."""
    settings = standalone_settings(tmp_path_factory.mktemp("guarded"), demo=True, admin_token=TOKEN)
    server = start_extender(settings)
    yield server
    server.stop()


def test_a_server_with_a_token_refuses_inspect_without_it(guarded: RunningExtender) -> None:
    result = CliRunner().invoke(
        app, ["inspect", "--server", guarded.url], env={"VGPU_ADMIN_TOKEN": ""}
    )
    assert result.exit_code == 1
    assert "answered 401" in result.stderr and "missing bearer token" in result.stderr


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_inspect_sends_the_token(guarded: RunningExtender, how: str) -> None:
    argv = ["inspect", "demo-t4-1", "--server", guarded.url]
    env = {"VGPU_ADMIN_TOKEN": TOKEN if how == "environment" else ""}
    if how == "flag":
        argv += ["--token", TOKEN]
    result = CliRunner().invoke(app, argv, env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("demo-t4-1")
    assert TOKEN not in result.output


def test_a_store_error_never_shows_the_password() -> None:
    url = f"postgresql+psycopg://vgpu:S3cretPW-inspect@127.0.0.1:{free_port()}/x?connect_timeout=2"
    result = CliRunner().invoke(app, ["inspect", "--database-url", url])
    assert result.exit_code == 1
    assert "cannot read the store" in result.stderr
    assert "S3cretPW-inspect" not in result.output
