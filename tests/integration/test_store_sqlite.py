"""The store on SQLite files: the shared contract plus SQLite's own settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from tests.integration.driver_contract import DriverContract
from tests.integration.store_contract import Db, StoreContract, emptied
from tests.integration.store_vendor_contract import VendorStoreContract
from vgpu_extender.store import make_engine, migrate


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}")
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def db(migrated: Engine) -> Db:
    return emptied(migrated)


@pytest.fixture
def unmigrated(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    yield engine
    engine.dispose()


class TestSqliteStore(StoreContract):
    pass


class TestSqliteVendorStore(VendorStoreContract):
    pass


class TestSqliteDriver(DriverContract):
    pass


@pytest.mark.parametrize(
    ("pragma", "expected"),
    [
        pytest.param("journal_mode", "wal", id="wal"),
        pytest.param("foreign_keys", 1, id="foreign-keys"),
        pytest.param("busy_timeout", 30000, id="busy-timeout"),
    ],
)
def test_sqlite_connections_are_configured(db: Db, pragma: str, expected: object) -> None:
    with db.engine.connect() as connection:
        assert connection.exec_driver_sql(f"PRAGMA {pragma}").scalar() == expected


def test_sqlite_transactions_take_the_write_lock_at_begin(db: Db) -> None:
    with db.factory.begin() as session:
        session.execute(text("SELECT 1"))
        raw = session.connection().connection.dbapi_connection
        assert raw is not None
        # Under BEGIN IMMEDIATE a second writer cannot start, even before any write.
        other = make_engine(str(db.engine.url), connect_args={"timeout": 0.05})
        try:
            with pytest.raises(Exception, match="locked"), other.begin() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            other.dispose()


def test_migrate_by_url_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "by-url.db"
    migrate(f"sqlite:///{path}")
    assert path.is_file()
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        tables = {
            row[0]
            for row in connection.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type='table'"
            )
        }
    engine.dispose()
    assert {"nodes", "devices", "allocations", "alembic_version"} <= tables


def test_the_pool_keeps_as_many_connections_as_asked(tmp_path: Path) -> None:
    # Binds in flight each hold a connection: every one of them goes back to the pool
    # for the next bind, rather than being closed and opened again.
    engine = make_engine(f"sqlite:///{tmp_path / 'pool.db'}", pool_size=12)
    try:
        held = [engine.connect() for _ in range(12)]
        for connection in held:
            connection.close()
        assert engine.pool.checkedin() == 12
        peak = [engine.connect() for _ in range(24)]  # as many more at a peak
        for connection in peak:
            connection.close()
        assert engine.pool.checkedin() == 12
    finally:
        engine.dispose()


def test_an_in_memory_database_keeps_its_own_pool() -> None:
    engine = make_engine("sqlite://", pool_size=12)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        engine.dispose()
