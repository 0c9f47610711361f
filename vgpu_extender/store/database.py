"""Engines and sessions for the two supported backends.

SQLite is the embedded default (one file under the working directory). Every SQLite
transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, so
concurrent writers queue on ``busy_timeout`` instead of failing with "database is
locked" when a read-then-write transaction tries to upgrade its lock. PostgreSQL
(``postgresql+psycopg://``) is the option for several replicas; there, writers
serialise per node with ``SELECT ... FOR UPDATE`` on the node's row.

A PostgreSQL URL may name several servers, libpq's way (a primary and its standbys:
``?host=db1:5432,db2:5432&target_session_attrs=read-write``): each new connection
goes to whichever is the primary now. Pooled connections are checked before use
(pre-ping), and the first one found dead makes the pool drop all the others, so after
a failover the next transaction connects to the promoted standby.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from vgpu_extender.backoff import Backoff
from vgpu_extender.redaction import hide_passwords
from vgpu_extender.store.errors import (
    StoreInputError,
    StoreUnavailable,
    classify,
    classify_errors,
)

logger = logging.getLogger(__name__)

#: The embedded default: a SQLite file in the working directory.
DEFAULT_URL = "sqlite:///vgpu-extender.db"

#: How long a SQLite writer waits for the lock before giving up.
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Drivers the store is tested with; a bare ``postgresql://`` URL gets psycopg 3.
_POSTGRES_DRIVER = "postgresql+psycopg"
_SUPPORTED = ("sqlite", "sqlite+pysqlite", _POSTGRES_DRIVER)

#: libpq settings a PostgreSQL connection gets unless its URL sets them: give up on an
#: unreachable server in seconds (per host, so a multi-host URL moves on to the next),
#: and notice a server that vanished without closing the connection (a failed node)
#: within about 10 s rather than the kernel's 15 minutes.
POSTGRES_CONNECT_DEFAULTS: dict[str, str] = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


def parse_url(url: str | URL) -> URL:
    """Validate a database URL and pick the driver the store supports for it."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is no number
        shown = hide_passwords(str(url))
        raise StoreInputError("not a database URL", field="database_url", value=shown) from exc
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
    if parsed.get_backend_name() == "postgresql":
        parsed = _normalise_hosts(parsed)
    return parsed


def _normalise_hosts(url: URL) -> URL:
    """Check a multi-host URL's ``host``/``port`` query and write it the one way the
    driver reads in every case: ``host=H1,H2&port=P1,P2``.

    Also accepted: ``host=H1:P1,H2:P2`` (libpq's hosts with their ports, which
    SQLAlchemy would hand to libpq as one host name) and ``host=H1:P1&host=H2:P2``.
    """
    query = url.query
    if "host" not in query:
        return url
    tokens = _split(query["host"])
    if "port" in query:
        if any(_host_port(token)[1] for token in tokens):
            raise _host_error(url, "give ports either as host=H:P or in port=, not both")
        ports = _split(query["port"])
        if len(ports) != len(tokens):
            raise _host_error(url, f"{len(tokens)} hosts but {len(ports)} ports")
        pairs = list(zip(tokens, ports, strict=True))
    else:
        pairs = [_host_port(token) for token in tokens]
    for host, port in pairs:
        if not host:
            raise _host_error(url, "an empty host name")
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise _host_error(url, f"port {port!r} of host {host!r} is not a port number")
    rest = {key: value for key, value in query.items() if key not in ("host", "port")}
    hosts = {"host": ",".join(host for host, _ in pairs)}
    if any(port for _, port in pairs):
        hosts["port"] = ",".join(port for _, port in pairs)
    return url.set(query={**rest, **hosts})


def _split(value: str | tuple[str, ...]) -> list[str]:
    values = [value] if isinstance(value, str) else list(value)
    return [part.strip() for each in values for part in each.split(",")]


def _host_port(token: str) -> tuple[str, str]:
    """``HOST:PORT``, ``[IPV6]:PORT``, or a bare host (an IPv6 address, a socket path)."""
    if token.startswith("[") and "]" in token:
        host, _, rest = token[1:].partition("]")
        return host, rest.removeprefix(":")
    if token.count(":") == 1:
        host, _, port = token.partition(":")
        return host, port
    return token, ""


def _host_error(url: URL, problem: str) -> StoreInputError:
    return StoreInputError(
        f"bad host list in the database URL: {problem}",
        field="database_url",
        value=url.render_as_string(hide_password=True),
    )


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
    # Defaults only: what the URL says wins (connect_args would override the URL).
    connect_args = {
        key: value for key, value in POSTGRES_CONNECT_DEFAULTS.items() if key not in parsed.query
    }
    connect_args.update(engine_options.pop("connect_args", {}))
    return classify_errors(create_engine(parsed, connect_args=connect_args, **engine_options))


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


def wait_for_database(
    engine: Engine,
    *,
    timeout_s: float,
    backoff: Backoff | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Connect once (``SELECT 1``), trying again with exponential backoff and jitter
    while the server cannot be reached, for at most ``timeout_s``; returns the tries.

    A database that starts with the extender (a Pod next to it, a restarted server) is
    there a few seconds later; one that is not there by the deadline raises
    ``StoreUnavailable`` with the tries counted. Each distinct error is logged once.
    SQLite is tried once: a local file that cannot be opened does not come back.
    """
    retry = engine.dialect.name != "sqlite"
    backoff = backoff if backoff is not None else Backoff(initial_s=0.25, cap_s=5.0)
    deadline = clock() + timeout_s
    seen: set[str] = set()
    attempt = 0
    while True:
        attempt += 1
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as exc:  # classified below; a driver error of any kind
            error = exc if isinstance(exc, StoreUnavailable) else classify(exc, "connect")
            if not isinstance(error, StoreUnavailable):
                raise error from exc
            reason = hide_passwords(error.message)
            delay = backoff.next_delay()
            left = deadline - clock()
            if not retry or left <= 0:
                raise StoreUnavailable(
                    f"{reason} (after {attempt} tries in {timeout_s:g} s)", operation="connect"
                ) from exc
            if reason not in seen:
                seen.add(reason)
                logger.warning(
                    "store not reachable yet: %s; trying again for up to %.0f s", reason, left
                )
            sleep(min(delay, left))
            continue
        if attempt > 1:
            logger.info("store reachable after %d tries", attempt)
        return attempt


def check_writable(engine: Engine) -> None:
    """Fail now, not on the first bind, when a SQLite database cannot be written (a
    read-only file or directory, a read-only mount): one write in a transaction that
    is rolled back. The driver's error leaves classified (``StoreError``)."""
    if engine.dialect.name != "sqlite":
        return
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            version = connection.exec_driver_sql("PRAGMA user_version").scalar()
            connection.exec_driver_sql(f"PRAGMA user_version = {int(version or 0)}")
            transaction.rollback()
    except Exception as exc:
        raise classify(exc, "check the database is writable") from exc


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
