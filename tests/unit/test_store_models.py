"""Store pieces that need no database: URLs, schema names, row conversion, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import OperationalError

from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.store import StoreConflict, StoreError, StoreInputError, parse_url
from vgpu_extender.store.errors import store_operation
from vgpu_extender.store.models import AllocationModel, Base
from vgpu_extender.store.rows import assignment_of
from vgpu_extender.store.sqltypes import UtcDateTime


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        pytest.param("sqlite:///vgpu.db", "sqlite", id="sqlite-relative"),
        pytest.param("postgresql://u@h/db", "postgresql+psycopg", id="bare-postgresql"),
        pytest.param("postgres://u@h/db", "postgresql+psycopg", id="postgres-alias"),
        pytest.param("postgresql+psycopg://u@h/db", "postgresql+psycopg", id="psycopg"),
    ],
)
def test_parse_url_picks_driver(url: str, driver: str) -> None:
    assert parse_url(url).drivername == driver


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("not a url", "not a url", id="garbage"),
        pytest.param(
            "mysql://u:secret@h/db", "mysql://u:***@h/db", id="unsupported-hides-password"
        ),
    ],
)
def test_parse_url_refuses_with_field(url: str, shown: str) -> None:
    with pytest.raises(StoreInputError) as caught:
        parse_url(url)
    assert caught.value.field == "database_url"
    assert caught.value.value == shown
    assert "secret" not in str(caught.value)


def test_constraint_names_are_deterministic() -> None:
    names: set[str | None] = set()
    for table in Base.metadata.tables.values():
        names.update(str(c.name) for c in table.constraints)
        names.update(str(i.name) for i in table.indexes)
    assert {
        "pk_nodes",
        "uq_nodes_name",
        "ck_nodes_source",
        "uq_devices_uuid",
        "ck_devices_count_positive",
        "fk_devices_node_id_nodes",
        "uq_allocations_pod_uid_container_index_device_uuid",
        "ck_allocations_state",
        "ix_allocations_node_state",
        "ix_allocations_pod_uid",
        "fk_allocations_device_uuid_devices",
    } <= names


@pytest.mark.parametrize(
    ("value", "dialect", "stored"),
    [
        pytest.param(
            datetime(2025, 1, 1, 13, tzinfo=timezone(timedelta(hours=1))),
            sqlite.dialect(),
            datetime(2025, 1, 1, 12),
            id="sqlite-naive-utc",
        ),
        pytest.param(
            datetime(2025, 1, 1, 13, tzinfo=timezone(timedelta(hours=1))),
            make_url("postgresql+psycopg://").get_dialect()(),
            datetime(2025, 1, 1, 12, tzinfo=UTC),
            id="postgres-aware-utc",
        ),
    ],
)
def test_timestamps_are_stored_as_utc(value: datetime, dialect: Dialect, stored: datetime) -> None:
    column = UtcDateTime()
    bound = column.process_bind_param(value, dialect)
    assert bound == stored and (bound.tzinfo is None) == (stored.tzinfo is None)
    back = column.process_result_value(bound, dialect)
    assert back == value and back is not None and back.tzinfo == UTC


def test_naive_timestamp_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        UtcDateTime().process_bind_param(datetime(2025, 1, 1), sqlite.dialect())


def _row(index: int, uuid: str, *, init: bool = False, row_id: int = 0) -> AllocationModel:
    return AllocationModel(
        id=row_id,
        pod_uid="p",
        node="n",
        device_uuid=uuid,
        vendor="NVIDIA",
        container_index=index,
        init=init,
        memory_mib=100 * (index + 1),
        cores=index,
    )


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        pytest.param(
            [_row(0, "a", row_id=2), _row(0, "b", row_id=1)],
            PodAssignment("n", ((DeviceGrant("b", 100, 0), DeviceGrant("a", 100, 0)),)),
            id="grant-order-is-insert-order",
        ),
        pytest.param(
            [_row(2, "a")],
            PodAssignment("n", ((), (), (DeviceGrant("a", 300, 2),))),
            id="gaps-become-empty-containers",
        ),
        pytest.param(
            [_row(0, "a", init=True), _row(1, "a", row_id=1)],
            PodAssignment(
                "n", ((DeviceGrant("a", 100, 0),), (DeviceGrant("a", 200, 1),)), (True, False)
            ),
            id="init-flags-kept",
        ),
    ],
)
def test_assignment_of_rows(rows: list[AllocationModel], expected: PodAssignment) -> None:
    assert assignment_of(rows) == expected


def test_store_operation_names_the_operation() -> None:
    @store_operation("frob")
    def fails_in_driver() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    @store_operation("frob")
    def conflicts() -> None:
        raise StoreConflict("device g0 is full")

    with pytest.raises(StoreError, match=r"^store unavailable: frob: \(builtins.Exception\) conn"):
        fails_in_driver()
    with pytest.raises(StoreConflict, match=r"^store frob: device g0 is full$") as caught:
        conflicts()
    assert caught.value.operation == "frob"
    assert caught.value.detail == "device g0 is full"
