"""Revision 0002 on a database holding 0001's rows, on SQLite and on PostgreSQL.

Rows are written at 0001 with plain SQL, as an older build left them; the upgrade must
keep every one of them, give each allocation its device's vendor word and each device
empty custom info, and the downgrade must give 0001's rows back.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Connection, Engine, bindparam, inspect, text
from sqlalchemy.engine import make_url

from vgpu_extender.domain import DeviceGrant
from vgpu_extender.store import (
    AllocationState,
    assignments,
    live_allocations,
    load_inventories,
    make_engine,
    migrate,
    schema_revision,
    session_factory,
)
from vgpu_extender.store.migrate import alembic_config
from vgpu_extender.store.models import Base
from vgpu_extender.store.sqltypes import UtcDateTime

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2025, 1, 1, 12, 5, tzinfo=UTC)
ASCEND = "Ascend910B3"

#: The columns each table had at 0001, in order.
COLUMNS_0001 = {
    "nodes": "id, name, labels, cordoned, source, problem, updated_at",
    "devices": 'id, uuid, node_id, "index", vendor, type, count, memory_mib, cores, numa, '
    "mode, healthy",
    "allocations": "id, pod_uid, namespace, pod_name, node, device_uuid, container_index, "
    "init, memory_mib, cores, state, created_at, updated_at, bound_at, released_at",
}

_NODE = text(
    "INSERT INTO nodes (id, name, labels, cordoned, source, problem, updated_at) "
    "VALUES (:id, :name, :labels, :cordoned, :source, :problem, :ts)"
).bindparams(
    bindparam("labels", type_=JSON()),
    bindparam("cordoned", type_=JSON()),
    bindparam("ts", type_=UtcDateTime()),
)
_DEVICE = text(
    'INSERT INTO devices (id, uuid, node_id, "index", vendor, type, count, memory_mib, cores, '
    "numa, mode, healthy) VALUES (:id, :uuid, :node_id, :index, :vendor, :type, :count, "
    ":memory, :cores, :numa, :mode, :healthy)"
)
_ALLOCATION = text(
    "INSERT INTO allocations (id, pod_uid, namespace, pod_name, node, device_uuid, "
    "container_index, init, memory_mib, cores, state, created_at, updated_at, bound_at, "
    "released_at) VALUES (:id, :uid, 'ns', :uid, :node, :device, :container, :init, "
    ":memory, :cores, :state, :created, :created, :bound, :released)"
).bindparams(
    bindparam("created", type_=UtcDateTime()),
    bindparam("bound", type_=UtcDateTime()),
    bindparam("released", type_=UtcDateTime()),
)

NODES: list[dict[str, Any]] = [
    {"id": 1, "name": "node-a", "labels": {"zone": "z1"}, "cordoned": [], "source": "api"},
    {"id": 2, "name": "node-b", "labels": {}, "cordoned": ["npu-b1"], "source": "annotation"},
]
DEVICES = [
    (1, "GPU-a0", 1, 0, "NVIDIA", "A100", 10, 8192, 100),
    (2, "GPU-a1", 1, 1, "NVIDIA", "A100", 10, 8192, 100),
    (3, "npu-b0", 2, 0, ASCEND, ASCEND, 4, 65536, 20),
    (4, "npu-b1", 2, 1, ASCEND, ASCEND, 4, 65536, 20),
]
#: (id, pod, node, device, container, init, memory, cores, state)
ALLOCATIONS = [
    (1, "p-reserved", "node-a", "GPU-a0", 0, False, 1000, 10, "reserved"),
    (2, "p-bound", "node-a", "GPU-a1", 0, True, 2000, 20, "bound"),
    (3, "p-bound", "node-a", "GPU-a1", 1, False, 3000, 30, "bound"),
    (4, "p-npu", "node-b", "npu-b0", 0, False, 16384, 5, "bound"),
    (5, "p-npu", "node-b", "npu-b1", 0, False, 16384, 5, "bound"),
    (6, "p-released", "node-b", "npu-b0", 0, False, 4096, 0, "released"),
]
#: The vendor word each allocation must carry after the upgrade: its device's.
VENDORS = {1: "NVIDIA", 2: "NVIDIA", 3: "NVIDIA", 4: ASCEND, 5: ASCEND, 6: ASCEND}


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of its own, never migrated."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    fresh: str = request.getfixturevalue("fresh_postgres")
    return fresh


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    engine = make_engine(url)
    yield engine
    engine.dispose()


def _seed(engine: Engine) -> None:
    with engine.begin() as connection:
        for node in NODES:
            connection.execute(_NODE, {**node, "problem": None, "ts": T0})
        for id_, uuid, node_id, index, vendor, kind, count, memory, cores in DEVICES:
            connection.execute(
                _DEVICE,
                {
                    "id": id_,
                    "uuid": uuid,
                    "node_id": node_id,
                    "index": index,
                    "vendor": vendor,
                    "type": kind,
                    "count": count,
                    "memory": memory,
                    "cores": cores,
                    "numa": 0,
                    "mode": "hami-core",
                    "healthy": uuid != "npu-b1",
                },
            )
        for id_, uid, on_node, device, container, init, memory, cores, state in ALLOCATIONS:
            connection.execute(
                _ALLOCATION,
                {
                    "id": id_,
                    "uid": uid,
                    "node": on_node,
                    "device": device,
                    "container": container,
                    "init": init,
                    "memory": memory,
                    "cores": cores,
                    "state": state,
                    "created": T0,
                    "bound": T1 if state == "bound" else None,
                    "released": T1 if state == "released" else None,
                },
            )


def _rows_0001(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, 0001's columns only, as the driver returns them."""
    with engine.connect() as connection:
        return {
            table: [
                tuple(row)
                for row in connection.execute(text(f"SELECT {columns} FROM {table} ORDER BY id"))
            ]
            for table, columns in COLUMNS_0001.items()
        }


def _vendors(connection: Connection) -> dict[int, str]:
    """Each allocation's vendor word, by row id."""
    rows = connection.execute(text("SELECT id, vendor FROM allocations"))
    return {row[0]: row[1] for row in rows}


def _columns(engine: Engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def _downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)


def _upgraded_0001(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    migrate(engine, revision="0001")
    assert schema_revision(engine) == "0001"
    _seed(engine)
    return _rows_0001(engine)


def test_the_upgrade_keeps_every_row_and_gives_allocations_their_devices_vendor(
    engine: Engine,
) -> None:
    before = _upgraded_0001(engine)
    assert [len(before[t]) for t in COLUMNS_0001] == [2, 4, 6]
    migrate(engine)
    assert schema_revision(engine) == "0002"
    assert _rows_0001(engine) == before
    with engine.connect() as connection:
        vendors = _vendors(connection)
        custom = connection.execute(text("SELECT custom_info FROM devices")).scalars().all()
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    assert vendors == VENDORS
    # SQLite's driver hands JSON back as text, psycopg decodes it.
    assert [c if isinstance(c, dict) else json.loads(c) for c in custom] == [{}] * 4
    # What the store reads of them.
    with session_factory(engine)() as session:
        inventories = load_inventories(session)
        stored = assignments(session)
        states = {(a.pod_uid, a.state) for a in live_allocations(session)}
    assert [d.custom_info for inv in inventories for d in inv.devices] == [()] * 4
    assert [d.healthy for d in inventories[1].devices] == [True, False]
    assert sorted(stored) == ["p-bound", "p-npu", "p-reserved"]
    assert stored["p-npu"].assignment.containers == (
        (DeviceGrant("npu-b0", 16384, 5, ASCEND), DeviceGrant("npu-b1", 16384, 5, ASCEND)),
    )
    assert stored["p-bound"].assignment.init == (True, False)
    assert {g.vendor for c in stored["p-bound"].assignment.containers for g in c} == {"NVIDIA"}
    assert stored["p-bound"].meta.bound_at == T1
    assert states == {
        ("p-reserved", AllocationState.RESERVED),
        ("p-bound", AllocationState.BOUND),
        ("p-npu", AllocationState.BOUND),
    }


def test_the_downgrade_gives_0001s_rows_back_and_upgrades_again(engine: Engine) -> None:
    before = _upgraded_0001(engine)
    migrate(engine)
    _downgrade(engine, "0001")
    assert schema_revision(engine) == "0001"
    assert "vendor" not in _columns(engine, "allocations")
    assert "custom_info" not in _columns(engine, "devices")
    assert _rows_0001(engine) == before
    migrate(engine)
    assert _rows_0001(engine) == before
    with engine.connect() as connection:
        vendors = _vendors(connection)
    assert vendors == VENDORS


#: An allocation on a device no row holds.
ORPHAN = (99, "p-orphan", "ns", "p-orphan", "node-a", "GPU-gone", 0, False, 1, 1, "bound")


def _write_orphan(url: str) -> None:
    """An allocation whose device row is gone, written with foreign keys off."""
    if url.startswith("sqlite"):
        _write_orphan_sqlite(url)
    else:
        _write_orphan_postgres(url)


def _write_orphan_sqlite(url: str) -> None:
    path = make_url(url).database
    assert path is not None
    raw = sqlite3.connect(path)  # foreign keys are off unless asked for
    try:
        raw.execute(
            "INSERT INTO allocations (id, pod_uid, namespace, pod_name, node, device_uuid, "
            "container_index, init, memory_mib, cores, state, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "'2025-01-01 12:00:00.000000', '2025-01-01 12:00:00.000000')",
            ORPHAN,
        )
        raw.commit()
    finally:
        raw.close()


def _write_orphan_postgres(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            # Replica mode fires no triggers, the foreign key's among them.
            connection.execute(text("SET LOCAL session_replication_role = replica"))
            connection.execute(
                text(
                    "INSERT INTO allocations (id, pod_uid, namespace, pod_name, node, "
                    "device_uuid, container_index, init, memory_mib, cores, state, "
                    "created_at, updated_at) VALUES (:v0, :v1, :v2, :v3, :v4, :v5, :v6, :v7, "
                    ":v8, :v9, :v10, :ts, :ts)"
                ).bindparams(bindparam("ts", type_=UtcDateTime())),
                {**{f"v{i}": v for i, v in enumerate(ORPHAN)}, "ts": T0},
            )
    finally:
        engine.dispose()


def test_an_allocation_whose_device_is_gone_does_not_fail_the_upgrade(
    engine: Engine, url: str
) -> None:
    before = _upgraded_0001(engine)
    _write_orphan(url)
    migrate(engine)
    with engine.connect() as connection:
        vendors = _vendors(connection)
    after = _rows_0001(engine)
    assert {t: rows for t, rows in after.items() if t != "allocations"} == {
        t: rows for t, rows in before.items() if t != "allocations"
    }
    assert [row for row in after["allocations"] if row[0] != 99] == before["allocations"]
    if engine.dialect.name == "sqlite":
        # The table copy's foreign key check would refuse it: deleted, as the cascade would.
        assert vendors == VENDORS
    else:
        assert vendors == {**VENDORS, 99: "NVIDIA"}
    with session_factory(engine)() as session:
        assert "p-orphan" not in assignments(session)
