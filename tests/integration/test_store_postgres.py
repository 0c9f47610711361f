"""The store on the real PostgreSQL server, each test in a schema of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from tests.integration.driver_contract import DriverContract
from tests.integration.store_contract import Db, StoreContract, emptied
from tests.integration.store_vendor_contract import VendorStoreContract
from vgpu_extender.store import make_engine, migrate

pytestmark = pytest.mark.postgres


def _schema_engine(postgres_url: str, schema: str) -> Engine:
    url = make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return make_engine(url)


def _new_schema(postgres_url: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{name}"'))
    try:
        yield name
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module")
def migrated(postgres_url: str) -> Iterator[Engine]:
    for name in _new_schema(postgres_url):
        engine = _schema_engine(postgres_url, name)
        migrate(engine)
        yield engine
        engine.dispose()


@pytest.fixture
def db(migrated: Engine) -> Db:
    return emptied(migrated)


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    yield from _new_schema(postgres_url)


@pytest.fixture
def unmigrated(postgres_url: str, schema: str) -> Iterator[Engine]:
    engine = _schema_engine(postgres_url, schema)
    yield engine
    engine.dispose()


class TestPostgresStore(StoreContract):
    pass


class TestPostgresVendorStore(VendorStoreContract):
    pass


class TestPostgresDriver(DriverContract):
    pass


def test_reserve_waits_for_the_node_lock(db: Db) -> None:
    """A transaction holding the node row blocks a reservation on that node."""
    from sqlalchemy.exc import OperationalError

    from tests.integration.store_contract import NODE_A, grants, put_node
    from vgpu_extender.store import StoreError, reserve

    put_node(db, NODE_A)
    with db.engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM nodes WHERE name = 'node-a' FOR UPDATE"))
        with db.factory.begin() as session:
            session.execute(text("SET LOCAL lock_timeout = '100ms'"))
            with pytest.raises(StoreError, match="store unavailable: reserve") as caught:
                reserve(
                    session,
                    pod_uid="p",
                    namespace="ns",
                    name="p",
                    assignment=grants("node-a", [("GPU-a0", 1, 0)]),
                )
            assert isinstance(caught.value.__cause__, OperationalError)
            session.rollback()
        holder.rollback()


def test_a_connection_lost_mid_bind_fails_that_bind_only(db: Db, postgres_url: str) -> None:
    """The server ends the bind's session between its statements: the reservation
    fails with a StoreError naming it, nothing is written, and the next bind gets a
    working connection from the pool."""
    from sqlalchemy.exc import DBAPIError

    from tests.integration.store_contract import NODE_A, do_reserve, grants, live, put_node
    from vgpu_extender.store import StoreError, reserve

    put_node(db, NODE_A)
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with (
            pytest.raises(StoreError, match="store unavailable: reserve") as caught,
            db.engine.begin() as connection,
        ):
            backend = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
            reserve(
                connection,
                pod_uid="lost",
                namespace="ns",
                name="lost",
                assignment=grants("node-a", [("GPU-a0", 1000, 0)]),
            )
        cause = caught.value.__cause__
        assert isinstance(cause, DBAPIError) and cause.connection_invalidated
    finally:
        admin.dispose()
    do_reserve(db, "next", grants("node-a", [("GPU-a0", 1000, 0)]))
    assert [row[0] for row in live(db)] == ["next"]
