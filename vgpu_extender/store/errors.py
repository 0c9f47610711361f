"""Errors the store raises, and the wrapper that turns driver errors into them.

Callers see three kinds of failure: bad input (``StoreInputError``, a ``ValueError``
naming the field and value), a state that forbids the write (``StoreConflict``, with
the ``Reason`` the engine would have given), and anything the database itself refused
(``StoreError`` naming the operation, with the driver error chained).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from vgpu_extender.domain import Reason

_P = ParamSpec("_P")
_R = TypeVar("_R")


class StoreError(Exception):
    """The store could not carry out an operation."""

    def __init__(self, message: str, *, operation: str = "") -> None:
        self.operation = operation
        super().__init__(f"store {operation}: {message}" if operation else message)


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


_E = TypeVar("_E", bound=StoreError)


def name_operation(error: _E, operation: str) -> _E:
    """``error`` with ``operation`` named in it, unless it names one already."""
    if not error.operation:
        error.operation = operation
        error.args = (f"store {operation}: {error.args[0]}",)
    return error


def store_operation(operation: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Name the operation in every error leaving the decorated function.

    Driver errors become ``StoreError`` (the original chained as ``__cause__``); the
    store's own errors get the operation filled in when they lack one.
    """

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return func(*args, **kwargs)
            except StoreError as exc:
                name_operation(exc, operation)
                raise
            except SQLAlchemyError as exc:
                first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise StoreError(first_line, operation=operation) from exc

        return wrapper

    return decorate
