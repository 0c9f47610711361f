"""The driver's side of store health: a cheap probe, and the engine's errors as events.

``services.store_health`` decides what they mean for readiness; here is only how a
connection is tried and how the engine tells of its errors, in SQLAlchemy's terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine, event
from sqlalchemy.engine import ExceptionContext


def ping(engine: Engine) -> None:
    """Check out a connection and run ``SELECT 1``; raises whatever the driver raises.

    On the raw driver cursor: SQLite's transactions begin ``IMMEDIATE`` (taking the
    write lock), which a probe must not do. A connection that fails the probe is
    invalidated, so the pool does not hand it out again.
    """
    with engine.connect() as connection:
        try:
            cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute("SELECT 1")
                cursor.fetchall()
            finally:
                cursor.close()
        except Exception:
            connection.invalidate()
            raise


@dataclass(frozen=True, slots=True)
class EngineError:
    """One error the engine reported: the error, and whether it came from the pool's
    pre-ping or says the connection is gone."""

    error: BaseException
    is_pre_ping: bool
    is_disconnect: bool


ErrorHook = Callable[[EngineError], None]


def listen_errors(engine: Engine, hook: ErrorHook) -> Callable[[], None]:
    """Call ``hook`` with every error ``engine`` reports; returns what stops it (once or
    more: stopping twice does nothing)."""

    def on_error(context: ExceptionContext) -> None:
        error = context.sqlalchemy_exception or context.original_exception
        hook(EngineError(error, context.is_pre_ping, context.is_disconnect))

    event.listen(engine, "handle_error", on_error)

    def stop() -> None:
        if event.contains(engine, "handle_error", on_error):
            event.remove(engine, "handle_error", on_error)

    return stop
