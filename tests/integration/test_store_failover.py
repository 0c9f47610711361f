"""A write transaction that loses its connection: run again, read back, or said unknown.

The connection is cut for real, at the wire, by a proxy in front of PostgreSQL
(``pg_proxy``): before a statement reaches the server, before the COMMIT does, or
after the server committed and before its answer came back. Rows are counted on a
direct connection, so "written once" is what the server holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import Connection, Engine, text

from tests.support.pg_proxy import PgProxy
from tests.support.server import StartExtender, args, bind_args, node_json, pod_json
from vgpu_extender import store

pytestmark = pytest.mark.postgres

INSERT = "INSERT INTO failover_probe (k) VALUES (:k)"
REGISTER = "hami.io/node-nvidia-register"


@pytest.fixture
def direct(fresh_postgres: str) -> Iterator[Engine]:
    engine = sqlalchemy.create_engine(fresh_postgres)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE failover_probe (k text)"))  # no key: doubles show
    yield engine
    engine.dispose()


@pytest.fixture
def proxy(fresh_postgres: str) -> Iterator[PgProxy]:
    running = PgProxy.before(fresh_postgres)
    yield running
    running.close()


@pytest.fixture
def engine(proxy: PgProxy, fresh_postgres: str) -> Iterator[Engine]:
    through = store.make_engine(proxy.url_for(fresh_postgres), pool_size=2)
    yield through
    through.dispose()


def _rows(direct: Engine, key: str) -> int:
    with direct.connect() as connection:
        return int(
            connection.execute(
                text("SELECT count(*) FROM failover_probe WHERE k = :k"), {"k": key}
            ).scalar_one()
        )


class Probe:
    """The work: insert one row; counts its runs; ``committed`` reads the row back."""

    def __init__(self, engine: Engine, key: str) -> None:
        self.engine = engine
        self.key = key
        self.runs = 0

    def work(self, connection: Connection) -> str:
        self.runs += 1
        connection.execute(text(INSERT), {"k": self.key})
        return self.key

    def committed(self, key: str) -> bool:
        with self.engine.connect() as connection:
            found = connection.execute(
                text("SELECT 1 FROM failover_probe WHERE k = :k"), {"k": key}
            ).first()
        return found is not None


def test_a_connection_lost_before_the_commit_is_run_again(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "before-insert")
    proxy.cut("before", "INSERT INTO failover_probe")
    assert store.run_transaction(engine, probe.work, committed=probe.committed) == probe.key
    assert proxy.cuts == 1 and probe.runs == 2
    assert _rows(direct, probe.key) == 1


def test_a_commit_whose_answer_was_lost_stands_when_its_rows_are_there(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "after-commit")
    proxy.cut("after", "COMMIT")
    assert store.run_transaction(engine, probe.work, committed=probe.committed) == probe.key
    assert proxy.cuts == 1
    assert probe.runs == 1  # not run again: it was written
    assert _rows(direct, probe.key) == 1


def test_a_commit_lost_on_its_way_is_run_again_once_its_rows_are_found_absent(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "before-commit")
    proxy.cut("before", "COMMIT")
    assert store.run_transaction(engine, probe.work, committed=probe.committed) == probe.key
    assert proxy.cuts == 1 and probe.runs == 2
    assert _rows(direct, probe.key) == 1


def test_a_commit_that_cannot_be_read_back_is_reported_unknown(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "unreadable")
    proxy.cut("after", "COMMIT", refuse_after=True)  # then the server looks gone
    with pytest.raises(store.StoreError, match="lost during commit") as raised:
        store.run_transaction(engine, probe.work, committed=probe.committed, operation="probe")
    assert str(raised.value).startswith("store unavailable: probe:")
    assert "could not be read back" in str(raised.value)
    assert probe.runs == 1
    assert _rows(direct, probe.key) == 1  # it did commit: a blind rerun would double it


def test_without_a_check_a_lost_commit_is_never_run_again(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "no-check")
    proxy.cut("after", "COMMIT")
    with pytest.raises(store.StoreError, match="could not be read back"):
        store.run_transaction(engine, probe.work)
    assert probe.runs == 1 and _rows(direct, probe.key) == 1


def test_a_second_lost_connection_is_not_retried_again(
    engine: Engine, proxy: PgProxy, direct: Engine
) -> None:
    probe = Probe(engine, "twice")
    proxy.cut("before", "INSERT INTO failover_probe", times=2)
    with pytest.raises(store.StoreError) as raised:
        store.run_transaction(engine, probe.work, committed=probe.committed)
    assert store.is_disconnect(raised.value)
    assert probe.runs == 2 and _rows(direct, probe.key) == 0
    # The pool recovers by itself: the next transaction goes through.
    assert store.run_transaction(engine, probe.work) == probe.key
    assert _rows(direct, probe.key) == 1


def test_an_error_the_server_answered_is_not_retried(engine: Engine, direct: Engine) -> None:
    runs = []

    def work(connection: Connection) -> None:
        runs.append(1)
        connection.execute(text("INSERT INTO no_such_table VALUES (1)"))

    with pytest.raises(store.StoreError, match="no_such_table") as raised:
        store.run_transaction(engine, work, operation="probe")
    assert not store.is_disconnect(raised.value)
    assert len(runs) == 1


@pytest.mark.parametrize(
    ("fault", "sql"),
    [("after", "COMMIT"), ("before", "COMMIT"), ("before", "INSERT INTO allocations")],
    ids=["answer-lost", "commit-lost", "insert-lost"],
)
def test_a_bind_whose_connection_is_cut_answers_success_with_its_rows_once(
    extender: StartExtender,
    proxy: PgProxy,
    fresh_postgres: str,
    tmp_path: Path,
    fault: str,
    sql: str,
) -> None:
    inventory = tmp_path / "inventory.json"
    register = json.loads(node_json("gpu-1", gpus=2)["metadata"]["annotations"][REGISTER])
    inventory.write_text(json.dumps({"nodes": [{"name": "gpu-1", "devices": register}]}))
    running = extender(database_url=proxy.url_for(fresh_postgres), inventory_file=inventory)
    pod = pod_json("p", gpus=2, mem=1000)
    running.verb("/filter", args(pod, ["gpu-1"]))
    proxy.cut(fault, sql)  # type: ignore[arg-type]
    assert running.verb("/bind", bind_args(pod, "gpu-1")) == {"Error": ""}
    assert proxy.cuts == 1
    rows = running.live_rows(pod["metadata"]["uid"])
    assert len(rows) == 2 and {r.state for r in rows} == {store.AllocationState.BOUND}
    assert running.runtime.cluster.index.allocation(pod["metadata"]["uid"]) is not None
