"""Engines and sessions for the two supported backends.

SQLite is the embedded default (one file under the working directory). Every SQLite
transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, so
concurrent writers queue on ``busy_timeout`` instead of failing with "database is
locked" when a read-then-write transaction tries to upgrade its lock. PostgreSQL
(``postgresql+psycopg://``) is the option for several replicas; there, writers
serialise per node with ``SELECT ... FOR UPDATE`` on the node's row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from vgpu_extender.store.errors import StoreInputError, classify_errors

#: The embedded default: a SQLite file in the working directory.
DEFAULT_URL = "sqlite:///vgpu-extender.db"

#: How long a SQLite writer waits for the lock before giving up.
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Drivers the store is tested with; a bare ``postgresql://`` URL gets psycopg 3.
_POSTGRES_DRIVER = "postgresql+psycopg"
_SUPPORTED = ("sqlite", "sqlite+pysqlite", _POSTGRES_DRIVER)


def parse_url(url: str | URL) -> URL:
    """Validate a database URL and pick the driver the store supports for it."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreInputError("not a database URL", field="database_url", value=url) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername=_POSTGRES_DRIVER)
    if parsed.drivername not in _SUPPORTED:
        shown = parsed.render_as_string(hide_password=True)
        raise StoreInputError(
            f"unsupported database driver {parsed.drivername!r}; use sqlite:///PATH "
            "or postgresql+psycopg://USER@HOST/DB",
            field="database_url",
            value=shown,
        )
    return parsed


def make_engine(
    url: str | URL = DEFAULT_URL, *, pool_size: int | None = None, **engine_options: Any
) -> Engine:
    """Create an engine configured for the store (pragmas, locking, pool checks).

    ``pool_size``: connections kept open for reuse, and as many more opened (and closed
    after use) at peaks; an in-memory SQLite database has its own pool and ignores it.
    Size it to the work done at once (binds in flight each hold a connection): a
    connection opened per use costs more than the statements it runs.
    ``engine_options`` go to ``create_engine`` (echo, other pool settings); the store's
    own settings for the backend are applied on top. For SQLite,
    ``connect_args["timeout"]`` (seconds) sets how long a writer waits for the lock.
    """
    parsed = parse_url(url)
    in_memory = parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")
    if pool_size is not None and not in_memory:
        engine_options.setdefault("pool_size", pool_size)
        engine_options.setdefault("max_overflow", pool_size)
    if parsed.get_backend_name() == "sqlite":
        connect_args = dict(engine_options.pop("connect_args", {}))
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_S)
        connect_args.setdefault("check_same_thread", False)
        engine = create_engine(parsed, connect_args=connect_args, **engine_options)
        _configure_sqlite(
            engine,
            in_memory=in_memory,
            busy_timeout_s=float(connect_args["timeout"]),
        )
        return classify_errors(engine)
    engine_options.setdefault("pool_pre_ping", True)
    return classify_errors(create_engine(parsed, **engine_options))


def _configure_sqlite(engine: Engine, *, in_memory: bool, busy_timeout_s: float) -> None:
    busy_ms = int(busy_timeout_s * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Leave transaction control to the "begin" hook below rather than to the
        # sqlite3 module, which would open deferred transactions on its own.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions for units of work. Objects stay readable after commit, since callers
    receive plain values and never lazy-load after the session ends."""
    return sessionmaker(engine, expire_on_commit=False)


#: What a data function works in: the caller's ``Session``, or a bare ``Connection``
#: in a transaction for callers that hold no ORM objects and want none of the
#: session's bookkeeping (the bind path).
Unit = Session | Connection


def connection_of(unit: Unit) -> Connection:
    """The connection a unit of work runs its statements on (its transaction begun)."""
    return unit if isinstance(unit, Connection) else unit.connection()


def begin_immediate(unit: Unit) -> Connection:
    """Start the unit's database transaction now, taking SQLite's write lock, and
    return the connection it runs on.

    On SQLite every transaction begins ``IMMEDIATE``; calling this first in a unit of
    work makes the lock point explicit (before any read whose result the write relies
    on). On PostgreSQL it only opens the transaction; row locks do the rest.
    """
    return connection_of(unit)
