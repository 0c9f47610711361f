"""Core statements compiled once per dialect and run on the driver's own cursor.

Every bind runs the same few statements. Through ``Connection.execute`` each pays
again for the compiled-cache lookup and for SQLAlchemy's per-statement parameter and
result layers; through ``Connection.exec_driver_sql`` still for the result layer (a
``CursorResult`` built from the cursor's description for a handful of rows). On the
bind path those cost more CPU than the driver does. So the bind's statements are still
written in Core, but compiled once per dialect into the driver's SQL and parameter
layout, and run on the DB-API cursor of the connection, in the transaction the
``Connection`` manages. What SQLAlchemy does around a statement stays where it counts:
a driver error goes through the connection's own error handling (the engine's
``handle_error`` events, the wrapping in ``DBAPIError``, the invalidation of a lost
connection and of the pool), and an engine that logs or intercepts statements (``echo``,
cursor events) runs them through ``exec_driver_sql`` as before. The column types' own
bind and result processors are applied here, so values are written and read exactly as
``Connection.execute`` would write and read them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.selectable import SelectBase

Processor = Callable[[Any], Any]
Parameters = tuple[Any, ...] | dict[str, Any]


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """One statement as the driver takes it: its SQL text, how to lay out its
    parameters, and how to convert them and the rows it returns."""

    sql: str
    #: Parameter names in placeholder order for positional paramstyles (``?``);
    #: ``None`` where the driver takes a mapping (``%(name)s``).
    order: tuple[str, ...] | None
    #: Values fixed in the statement itself (``bindparam(name, value)``).
    fixed: Mapping[str, Any]
    #: The column type's bind processor for each parameter that has one.
    binds: Mapping[str, Processor]
    #: The column type's result processor for each selected column (``None``: as is);
    #: empty when no column has one.
    results: tuple[Processor | None, ...]

    @classmethod
    def compile(cls, statement: ClauseElement, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"not a SQL statement: {statement!r}")
        if compiled.post_compile_params or compiled.literal_execute_params:
            # Rendered per execution by SQLAlchemy (an IN list's items): compile one
            # statement per list length, with a parameter per item, instead.
            raise ValueError(f"statement has parameters rendered at execution: {compiled}")
        binds: dict[str, Processor] = {}
        for name, parameter in compiled.binds.items():
            processor = parameter.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                binds[name] = processor
        results: tuple[Processor | None, ...] = ()
        if isinstance(statement, SelectBase):
            results = tuple(
                column.type.dialect_impl(dialect).result_processor(dialect, None)
                for column in statement.selected_columns
            )
        if not any(results):
            results = ()  # rows come as the driver gives them
        order = tuple(compiled.positiontup or ()) if dialect.positional else None
        fixed = {
            name: parameter.value
            for name, parameter in compiled.binds.items()
            if parameter.value is not None
        }
        return cls(compiled.string, order, fixed, binds, results)

    def parameters(self, values: Mapping[str, Any]) -> Parameters:
        """``values`` (with the statement's fixed ones) converted and laid out."""
        merged = {**self.fixed, **values}
        for name, processor in self.binds.items():
            if name in merged:
                merged[name] = processor(merged[name])
        if self.order is None:
            return merged
        return tuple([merged[name] for name in self.order])

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        """A result row with each column's type conversion applied."""
        return tuple(
            value if processor is None or value is None else processor(value)
            for processor, value in zip(self.results, raw, strict=True)
        )


_compiled: weakref.WeakKeyDictionary[Dialect, dict[Hashable, DriverStatement]] = (
    weakref.WeakKeyDictionary()
)


def prepared(
    connection: Connection, key: Hashable, build: Callable[[], ClauseElement]
) -> DriverStatement:
    """The statement ``build`` makes, compiled for the connection's dialect on first
    use and remembered under ``key``."""
    dialect = connection.dialect
    statements = _compiled.get(dialect)
    if statements is None:
        statements = _compiled.setdefault(dialect, {})
    statement = statements.get(key)
    if statement is None:
        statement = statements[key] = DriverStatement.compile(build(), dialect)
    return statement


def fetch_all(
    connection: Connection, statement: DriverStatement, values: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Run a query in the connection's transaction; its rows, converted."""
    rows = _run(connection, statement.sql, statement.parameters(values))
    if not statement.results:
        return [tuple(row) for row in rows]
    return [statement.row(row) for row in rows]


def execute(
    connection: Connection, statement: DriverStatement, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Run a statement that returns nothing, once per parameter set in ``rows`` (the
    driver's ``executemany`` for several)."""
    if not rows:
        return
    parameters = [statement.parameters(values) for values in rows]
    _run(
        connection,
        statement.sql,
        parameters[0] if len(parameters) == 1 else parameters,
        fetch=False,
    )


def _run(
    connection: Connection,
    sql: str,
    parameters: Parameters | list[Parameters],
    *,
    fetch: bool = True,
) -> Sequence[Sequence[Any]]:
    """``sql`` on the connection's cursor, once per set when ``parameters`` is a list of
    them; the rows it returns (none unless ``fetch``)."""
    if _watched(connection):
        result = connection.exec_driver_sql(sql, parameters)
        return result.fetchall() if fetch else ()
    if not connection.in_transaction():
        connection.begin()  # as the connection's own execution would (autobegin)
    cursor = connection.connection.cursor()
    try:
        if isinstance(parameters, list):  # one layout for every set: tuples, or mappings
            cursor.executemany(sql, cast("Sequence[Sequence[Any]]", parameters))
        else:
            cursor.execute(sql, parameters)
        rows: Sequence[Sequence[Any]] = cursor.fetchall() if fetch else ()
    except BaseException as exc:  # as SQLAlchemy's own execution catches them
        # The handler SQLAlchemy's own execution calls (private to it, so the driver
        # contract tests pin what it does): events, DBAPIError, invalidation; it raises.
        connection._handle_dbapi_exception(exc, sql, parameters, cursor, None)
    cursor.close()
    return rows


def _watched(connection: Connection) -> bool:
    """Whether the engine logs statements or has listeners on their execution."""
    engine = connection.engine
    dispatch = engine.dispatch
    return bool(engine.echo or dispatch.before_cursor_execute or dispatch.after_cursor_execute)
