"""Errors the store raises, and the one place that classifies driver errors into them.

Callers see four kinds of failure: bad input (``StoreInputError``, a ``ValueError``
naming the field and value), a state that forbids the write (``StoreConflict``, with
the ``Reason`` the engine would have given), a store that cannot be reached now
(``StoreUnavailable``: the server refused or lost the connection, or no pooled
connection came in time; it passes, so the caller may answer 503 and retry), and
anything else the database refused (``StoreError`` naming the operation). The driver
error stays chained as ``__cause__``.

``classify`` is the one rule that sorts a driver error into these; ``store_operation``
applies it to every store function, and ``classify_errors`` installs it on an engine
for connections that cannot be opened, so code that opens sessions of its own (the
admin reads, the bind path) gets ``StoreUnavailable`` too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import ExceptionContext

from vgpu_extender.domain import Reason

_P = ParamSpec("_P")
_R = TypeVar("_R")


class StoreError(Exception):
    """The store could not carry out an operation."""

    def __init__(self, message: str, *, operation: str = "") -> None:
        self.operation = operation
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        return f"store {self.operation}: {self.message}" if self.operation else self.message


class StoreUnavailable(StoreError):  # noqa: N818 - a state, like StoreConflict
    """The store cannot be reached now (connection refused or lost, no pooled connection
    in time). Its text always begins ``store unavailable:``, whoever shows it."""

    def _render(self) -> str:
        where = f"{self.operation}: " if self.operation else ""
        return f"store unavailable: {where}{self.message}"


class StoreInputError(StoreError, ValueError):
    """An argument is malformed; ``field`` and ``value`` say which and what."""

    def __init__(self, message: str, *, field: str, value: object, operation: str = "") -> None:
        self.field = field
        self.value = value
        super().__init__(f"{message} (field {field!r}, value {value!r})", operation=operation)


class StoreConflict(StoreError):  # noqa: N818 - the name callers catch, fixed by the API
    """The write no longer fits the committed state (another bind got there first).

    ``reason`` is the engine's vocabulary for the same refusal, so the caller can
    report it the way filter would have; ``node`` and ``device`` locate it.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        node: str = "",
        device: str = "",
        operation: str = "",
    ) -> None:
        self.reason = reason
        self.node = node
        self.device = device
        self.detail = message
        super().__init__(message, operation=operation)


class AlreadyAllocated(StoreConflict):
    """The pod already holds live (reserved or bound) allocations."""

    def __init__(self, pod_uid: str, *, node: str, state: str, operation: str = "") -> None:
        self.pod_uid = pod_uid
        self.state = state
        super().__init__(
            f"pod {pod_uid} already has {state} allocations on node {node}",
            node=node,
            operation=operation,
        )


class ImportConflict(StoreConflict):
    """A running pod's assignment would over-commit devices the store already gives to
    other pods: ``devices`` names them, ``pods`` the UIDs holding them."""

    def __init__(
        self,
        message: str,
        *,
        pod_uid: str,
        node: str,
        devices: tuple[str, ...],
        pods: tuple[str, ...],
        reason: Reason | None = None,
        operation: str = "",
    ) -> None:
        self.pod_uid = pod_uid
        self.devices = devices
        self.pods = pods
        super().__init__(
            message,
            reason=reason,
            node=node,
            device=devices[0] if devices else "",
            operation=operation,
        )


_E = TypeVar("_E", bound=StoreError)


def name_operation(error: _E, operation: str) -> _E:
    """``error`` with ``operation`` named in it, unless it names one already."""
    if not error.operation:
        error.operation = operation
        error.args = (error._render(),)
    return error


# --------------------------------------------------------------------------- classifying
#: The driver's (SQLAlchemy's) base error, for callers that open sessions of their own
#: and classify what leaves them.
DriverError = sa_exc.SQLAlchemyError

#: Every exception a caller of the store may meet when the store fails: the store's own
#: errors and a driver error raised outside ``store_operation`` (a session opened by the
#: caller). ``classify`` turns any of them into a ``StoreError``.
FAILURES: tuple[type[Exception], ...] = (StoreError, DriverError)

#: Driver errors that say the server cannot be used now, rather than what it answered:
#: PEP 249's OperationalError (connection refused or lost, server shutting down,
#: SQLite's file unopenable; not a busy server, see ``is_busy``) and InterfaceError (the
#: connection object is broken), the pool's timeout, and a lost connection.
_UNAVAILABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sa_exc.DisconnectionError,
)


#: PostgreSQL SQLSTATEs of a server that is reachable but busy: the transaction lost a
#: deadlock or a serialization race (class 40), a statement ran past its timeout
#: (57014). Trying again later may well succeed; the store is not out of reach. A lock
#: not granted in time (55P03) stays unavailable: a node lock held that long is what a
#: lost holder looks like, and callers answer it with 503.
_BUSY_SQLSTATE_CLASSES = ("40",)
_BUSY_SQLSTATES = frozenset({"57014"})
#: SQLite's word for another connection holding the write lock past the busy timeout.
_SQLITE_BUSY = "database is locked"


def _is_busy_driver_error(error: BaseException) -> bool:
    if not isinstance(error, sa_exc.DBAPIError) or error.connection_invalidated:
        return False
    orig = error.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(sqlstate, str):
        return sqlstate in _BUSY_SQLSTATES or sqlstate.startswith(_BUSY_SQLSTATE_CLASSES)
    return _SQLITE_BUSY in str(orig).lower()


def is_busy(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, says the store is reachable
    but busy (a deadlock, a serialization failure, a lock or statement timeout, SQLite's
    file locked): the store refused this try, it is not out of reach."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, StoreUnavailable):
            return False
        if _is_busy_driver_error(seen):
            return True
        seen = seen.__cause__
    return False


def is_unavailable(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, says the store cannot be
    reached (see ``_UNAVAILABLE``), rather than that it refused the request or was busy
    (``is_busy``)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, StoreUnavailable):
            return True
        if _is_busy_driver_error(seen):
            return False
        if isinstance(seen, _UNAVAILABLE):
            return True
        if isinstance(seen, sa_exc.DBAPIError) and seen.connection_invalidated:
            return True
        seen = seen.__cause__
    return False


def first_line(error: BaseException) -> str:
    """The error's first line (SQLAlchemy appends its background link on others)."""
    text = str(error)
    return text.splitlines()[0] if text.strip() else type(error).__name__


def classify(error: BaseException, operation: str = "") -> StoreError:
    """The store error ``error`` stands for: ``StoreUnavailable`` when it says the store
    cannot be reached, the store's own error as it is, else a ``StoreError`` with the
    driver's first line. ``operation`` is named where the error names none. The caller
    raises the result ``from error``."""
    if isinstance(error, StoreError) and not (type(error) is StoreError and is_unavailable(error)):
        return name_operation(error, operation) if operation else error
    if is_unavailable(error):
        cause = error.__cause__ if isinstance(error, StoreError) else None
        message = error.message if isinstance(error, StoreError) else first_line(error)
        named = operation or (error.operation if isinstance(error, StoreError) else "")
        unavailable = StoreUnavailable(message, operation=named)
        unavailable.__cause__ = cause or error
        return unavailable
    return StoreError(first_line(error), operation=operation)


def _on_engine_error(context: ExceptionContext) -> BaseException | None:
    """Connections that cannot be opened leave the engine as ``StoreUnavailable``.

    Only there: an error inside a transaction stays the driver's, so that the code
    running it (``store_operation``, the failover retry) can tell a lost connection
    from the server's answer; and a failed pre-ping is the pool's own business (it
    reconnects).
    """
    if context.is_pre_ping or context.connection is not None:
        return None
    error = context.sqlalchemy_exception or context.original_exception
    if not is_unavailable(error):
        return None
    return StoreUnavailable(first_line(error), operation="connect")


def classify_errors(engine: Engine) -> Engine:
    """Install ``classify`` on ``engine`` for connections it cannot open; returns it."""
    event.listen(engine, "handle_error", _on_engine_error)
    return engine


def store_operation(operation: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Name the operation in every error leaving the decorated function.

    Driver errors are classified (``classify``: ``StoreUnavailable`` or ``StoreError``,
    the original chained as ``__cause__``); the store's own errors get the operation
    filled in when they lack one.
    """

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return func(*args, **kwargs)
            except StoreError as exc:
                name_operation(exc, operation)
                raise
            except sa_exc.SQLAlchemyError as exc:
                raise classify(exc, operation) from exc

        return wrapper

    return decorate
