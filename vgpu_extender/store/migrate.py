"""Apply the Alembic revisions shipped in the package, with a config built in code.

No ``alembic.ini`` is needed at runtime: the script location is the package's own
``migrations`` folder, and the connection is handed to ``env.py`` directly.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from vgpu_extender.store.database import make_engine
from vgpu_extender.store.errors import StoreError

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged revisions (for ``command.*`` calls)."""
    config = Config()
    # configparser interpolation would read a '%' in the install path as a directive.
    config.set_main_option("script_location", str(_MIGRATIONS).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this build of the store expects the database to be at."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise StoreError("no migrations packaged", operation="migrate")
    return head


def _with_engine(target: str | URL | Engine) -> tuple[Engine, bool]:
    if isinstance(target, Engine):
        return target, False
    return make_engine(target), True


def migrate(target: str | URL | Engine, *, revision: str = "head") -> None:
    """Bring the database's schema up to ``revision`` (the latest by default).

    Safe to run on every start and from several replicas at once: applied revisions
    are skipped, and on PostgreSQL an advisory lock serialises concurrent runs.
    """
    engine, owned = _with_engine(target)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
    except SQLAlchemyError as exc:
        first_line = str(exc).splitlines()[0]
        raise StoreError(first_line, operation="migrate") from exc
    finally:
        if owned:
            engine.dispose()


def schema_revision(target: str | URL | Engine) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    engine, owned = _with_engine(target)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as exc:
        raise StoreError(str(exc).splitlines()[0], operation="schema revision") from exc
    finally:
        if owned:
            engine.dispose()
