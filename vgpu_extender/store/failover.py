"""A write transaction that survives a lost connection where it safely can.

When the database server goes away (a failover: the primary dies, a standby is
promoted) the connection a transaction runs on breaks. Two moments differ:

- *before the commit was sent*: nothing was written; the transaction is run once more
  on a new connection (which, with a multi-host URL, finds the new primary);
- *during the commit*: the server may have committed and lost only its answer. Running
  the work again blindly could write it twice, so the caller's ``committed`` check
  reads the rows back on a new connection: found, the transaction stands; absent, it
  is run once more; unreadable, the outcome is reported unknown.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from vgpu_extender.store.errors import StoreError, StoreUnavailable, classify, first_line

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Runs after the first one that lost its connection.
RETRIES = 1


def is_disconnect(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a connection the driver
    found broken, rather than an answer from the server."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        seen = seen.__cause__
    return False


def run_transaction(
    engine: Engine,
    work: Callable[[Connection], T],
    *,
    committed: Callable[[T], bool] | None = None,
    operation: str = "transaction",
) -> T:
    """``work(connection)`` in one transaction, committed; returns what it returned.

    A connection lost before the commit: run again (``RETRIES`` times). Lost during
    the commit: ``committed(result)`` (on its own connection) says whether the writes
    are there; when it cannot tell (or is not given) the outcome is unknown and a
    ``StoreUnavailable`` says so. Every driver error leaves classified (``classify``:
    ``StoreUnavailable`` or ``StoreError``) naming ``operation``, the cause chained.
    """
    attempts = RETRIES + 1
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        try:
            connection = engine.connect()
        except SQLAlchemyError as exc:
            raise classify(exc, operation) from exc
        with connection:
            transaction = connection.begin()
            try:
                result = work(connection)
            except BaseException as exc:
                if transaction.is_active:
                    _quiet_rollback(connection)
                if last or not is_disconnect(exc):
                    if isinstance(exc, SQLAlchemyError):
                        raise classify(exc, operation) from exc
                    raise
                logger.warning(
                    "store %s: connection lost before commit; running it again", operation
                )
                continue
            try:
                transaction.commit()
            except SQLAlchemyError as exc:
                if not is_disconnect(exc):
                    raise classify(exc, operation) from exc
                lost = exc
            else:
                return result
        # The commit's answer was lost: find out what became of it.
        outcome = _check(committed, result, operation)
        if outcome:
            logger.warning("store %s: connection lost during commit; the commit stands", operation)
            return result
        if outcome is None or last:
            reason = "the rows could not be read back" if outcome is None else "nothing was written"
            raise StoreUnavailable(
                f"connection lost during commit and {reason}: {first_line(lost)}",
                operation=operation,
            ) from lost
        logger.warning(
            "store %s: connection lost during commit, nothing written; running it again", operation
        )
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _check(committed: Callable[[T], bool] | None, result: T, operation: str) -> bool | None:
    """True / False when ``committed`` could tell, None when it could not."""
    if committed is None:
        return None
    try:
        return committed(result)
    except (SQLAlchemyError, StoreError) as exc:
        logger.warning(
            "store %s: cannot read back a commit in doubt: %s", operation, first_line(exc)
        )
        return None


def _quiet_rollback(connection: Connection) -> None:
    # A broken connection has nothing to roll back; the pool discards it.
    with contextlib.suppress(SQLAlchemyError):
        connection.rollback()
