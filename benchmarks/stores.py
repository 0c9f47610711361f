"""Stores the benchmarks start from: a cluster written as binds leave it, and throw-away
PostgreSQL databases."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any


def write_cluster(
    url: str,
    inventories: Iterable[Any],
    pods: Sequence[tuple[str, Any]],
    *,
    source: str = "file",
) -> None:
    """A fresh store at ``url`` holding ``inventories`` (``NodeInventory``) and every pod
    of ``pods`` (uid, ``PodAssignment`` of one container) bound: nodes through the
    repository, the allocation rows in one bulk insert (the per-pod bind path is not
    what the benchmarks measure)."""
    from sqlalchemy import insert

    from vgpu_extender import store
    from vgpu_extender.store.models import AllocationModel

    engine = store.make_engine(url)
    store.migrate(engine)
    sessions = store.session_factory(engine)
    now = datetime.now(UTC)
    with sessions.begin() as session:
        for inventory in inventories:
            store.upsert_node(session, inventory=inventory, source=source, now=now)
    rows = [
        {
            "pod_uid": uid,
            "namespace": "default",
            "pod_name": uid,
            "node": assignment.node,
            "device_uuid": grant.uuid,
            "vendor": grant.vendor,
            "container_index": 0,
            "init": False,
            "memory_mib": grant.memory_mib,
            "cores": grant.cores,
            "state": "bound",
            "created_at": now,
            "updated_at": now,
            "bound_at": now,
            "released_at": None,
        }
        for uid, assignment in pods
        for grant in assignment.containers[0]
    ]
    with sessions.begin() as session:
        session.execute(insert(AllocationModel), rows)
    engine.dispose()


def postgres_server(what: str) -> str | None:
    """The PostgreSQL server to make throw-away databases on (``VGPU_BENCH_POSTGRES_URL``,
    else ``VGPU_TEST_POSTGRES_URL``, else the test server), or None, saying that ``what``
    is left out, when none answers."""
    import sqlalchemy

    url = os.environ.get("VGPU_BENCH_POSTGRES_URL") or os.environ.get(
        "VGPU_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("select 1")
    except Exception as exc:
        print(f"{what} left out: no PostgreSQL server answers ({type(exc).__name__})")
        return None
    finally:
        engine.dispose()
    return url


class ThrowawayDatabase:
    """A database of its own on a PostgreSQL server, dropped by ``drop``."""

    def __init__(self, server_url: str) -> None:
        import sqlalchemy

        self._name = f"vgpu_bench_{uuid.uuid4().hex[:12]}"
        self._admin = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
        with self._admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{self._name}"')
        url = sqlalchemy.engine.make_url(server_url).set(database=self._name)
        self.url = url.render_as_string(hide_password=False)

    def drop(self) -> None:
        with self._admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self._name}" WITH (FORCE)')
        self._admin.dispose()
