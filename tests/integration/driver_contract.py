"""``store.driver`` against a real backend: statements run as the driver's SQL read
and write exactly what ``Connection.execute`` reads and writes, and stay visible to
the engine's events. Run against SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, bindparam, event, insert, select
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import IntegrityError

from tests.integration.store_contract import NODE_A, T0, Db, do_reserve, gpu, grants, put_node
from vgpu_extender.domain import NodeInventory
from vgpu_extender.store import driver
from vgpu_extender.store.models import Base

_nodes = Base.metadata.tables["nodes"]
_devices = Base.metadata.tables["devices"]
_allocations = Base.metadata.tables["allocations"]

_ROW = {
    "namespace": "ns",
    "pod_name": "p",
    "node": "node-a",
    "device_uuid": "GPU-a0",
    "vendor": "NVIDIA",
    "container_index": 0,
    "init": True,
    "memory_mib": 10,
    "cores": 5,
    "state": "reserved",
    "created_at": T0,
    "updated_at": T0 + timedelta(microseconds=1),
    "bound_at": None,
    "released_at": None,
}


def _insert_all_columns() -> Any:
    return insert(_allocations).values({name: bindparam(name) for name in ("pod_uid", *_ROW)})


class DriverContract:
    def test_a_query_reads_what_core_reads(self, db: Db) -> None:
        cordoned = NodeInventory(
            name="node-c",
            devices=(gpu("GPU-c0"), gpu("GPU-c1", index=1, healthy=False)),
            cordoned=frozenset({"GPU-c1"}),
            problem="",
        )
        put_node(db, cordoned)
        query = (
            select(_nodes.c.id, _nodes.c.cordoned, _nodes.c.problem, _devices.c.uuid,
                   _devices.c.healthy)
            .join(_devices, _devices.c.node_id == _nodes.c.id)
            .where(_nodes.c.name == bindparam("name"))
            .order_by(_devices.c.uuid)
        )  # fmt: skip
        with db.engine.begin() as connection:
            statement = driver.prepared(connection, "test: node and devices", lambda: query)
            ours = driver.fetch_all(connection, statement, {"name": "node-c"})
            core = [tuple(row) for row in connection.execute(query, {"name": "node-c"})]
        assert ours == core
        assert [(row[1], row[4]) for row in ours] == [(["GPU-c1"], True), (["GPU-c1"], False)]
        assert all(isinstance(row[4], bool) for row in ours)

    def test_rows_written_are_stored_as_core_stores_them(self, db: Db) -> None:
        put_node(db, NODE_A)
        with db.engine.begin() as connection:
            statement = driver.prepared(connection, "test: insert", _insert_all_columns)
            driver.execute(
                connection,
                statement,
                [{**_ROW, "pod_uid": "ours-1"}, {**_ROW, "pod_uid": "ours-2", "init": False}],
            )
            connection.execute(_insert_all_columns(), {**_ROW, "pod_uid": "core"})
        columns = [c for c in _allocations.c if c.name not in ("id", "pod_uid")]
        # As stored, compared without the types' conversions: the same text, numbers,
        # flags and timestamps whichever way the row was written.
        raw = ", ".join(c.name for c in columns)
        with db.engine.connect() as connection:
            stored = {
                row[0]: tuple(row[1:])
                for row in connection.exec_driver_sql(f"SELECT pod_uid, {raw} FROM allocations")
            }
            typed = {
                row.pod_uid: row
                for row in connection.execute(select(_allocations).order_by(_allocations.c.id))
            }
        assert stored["ours-1"] == stored["core"]
        assert stored["ours-2"] != stored["core"]  # init differs, and is stored as such
        assert typed["ours-1"].created_at == T0
        assert typed["ours-1"].created_at.tzinfo is not None
        assert (typed["ours-1"].init, typed["ours-2"].init) == (True, False)

    def test_fixed_values_are_sent_and_callers_values_win(self, db: Db) -> None:
        put_node(db, NODE_A)
        query = select(_nodes.c.name).where(_nodes.c.name == bindparam("name", "node-a"))
        with db.engine.begin() as connection:
            statement = driver.prepared(connection, "test: fixed", lambda: query)
            assert driver.fetch_all(connection, statement, {}) == [("node-a",)]
            assert driver.fetch_all(connection, statement, {"name": "node-x"}) == []

    def test_the_engine_events_see_the_bind_statements(self, db: Db) -> None:
        put_node(db, NODE_A)
        seen: list[str] = []

        def record(_conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
            seen.append(statement.split()[0].upper())

        event.listen(db.engine, "before_cursor_execute", record)
        try:
            do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        finally:
            event.remove(db.engine, "before_cursor_execute", record)
        # Lock the node, read its devices and grants, insert the rows.
        assert seen[-3:] == ["SELECT", "SELECT", "INSERT"]

    def test_the_statements_run_on_the_cursor_when_nothing_watches(
        self, db: Db, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        put_node(db, NODE_A)

        def result_layer(*_: Any, **__: Any) -> Any:
            raise AssertionError("the statement went through exec_driver_sql")

        query = select(_nodes.c.name).where(_nodes.c.name == bindparam("name"))
        with db.engine.begin() as connection:
            monkeypatch.setattr(connection, "exec_driver_sql", result_layer)
            found = driver.prepared(connection, "test: cursor query", lambda: query)
            written = driver.prepared(connection, "test: cursor insert", _insert_all_columns)
            assert driver.fetch_all(connection, found, {"name": "node-a"}) == [("node-a",)]
            driver.execute(connection, written, [{**_ROW, "pod_uid": "one"}])
            driver.execute(connection, written, [{**_ROW, "pod_uid": u} for u in ("two", "three")])
        with db.engine.connect() as connection:
            stored = connection.execute(select(_allocations.c.pod_uid)).scalars().all()
        assert sorted(stored) == ["one", "three", "two"]

    def test_a_driver_error_is_the_engines_error(self, db: Db) -> None:
        put_node(db, NODE_A)
        seen: list[type[BaseException]] = []

        def record(context: ExceptionContext) -> None:
            seen.append(type(context.original_exception))

        event.listen(db.engine, "handle_error", record)
        try:
            with db.engine.connect() as connection:
                statement = driver.prepared(connection, "test: insert", _insert_all_columns)
                row = {**_ROW, "pod_uid": "twice"}
                driver.execute(connection, statement, [row])
                with pytest.raises(IntegrityError) as caught:
                    driver.execute(connection, statement, [row])  # the same key again
                assert not caught.value.connection_invalidated
                assert "INSERT INTO allocations" in str(caught.value.statement)
                connection.rollback()
                # The connection is usable again after the rollback.
                driver.execute(connection, statement, [{**row, "pod_uid": "after"}])
                connection.commit()
        finally:
            event.remove(db.engine, "handle_error", record)
        assert len(seen) == 1 and issubclass(seen[0], db.engine.dialect.loaded_dbapi.Error)
        with db.engine.connect() as connection:
            stored = connection.execute(select(_allocations.c.pod_uid)).scalars().all()
        assert stored == ["after"]

    def test_a_statement_rendered_per_execution_is_refused_at_compile(self, db: Db) -> None:
        query = select(_allocations.c.pod_uid).where(_allocations.c.state.in_(["a", "b"]))
        with db.engine.connect() as connection, pytest.raises(ValueError, match="at execution"):
            driver.DriverStatement.compile(query, connection.dialect)
