"""Alembic environment: runs the revisions on the connection ``store.migrate`` passes in.

Alembic executes this file as a script. Without a connection in the config's
attributes (the ``alembic`` command line), it connects to ``sqlalchemy.url`` itself.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from vgpu_extender.store.database import make_engine
from vgpu_extender.store.models import Base

#: Key of the PostgreSQL advisory lock that keeps replicas starting together from
#: running the same revision twice.
MIGRATION_LOCK_KEY = 0x76475055


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    engine = make_engine(url)
    try:
        with engine.connect() as own_connection:
            _run(own_connection)
    finally:
        engine.dispose()


def run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
