"""The store's health as readiness sees it, the classification of driver errors, and
the throttled log: each rule alone, with clocks and engines the test controls."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc

from vgpu_extender.log_throttle import ThrottledLog
from vgpu_extender.services.store_health import StoreHealth
from vgpu_extender.store import make_engine
from vgpu_extender.store.errors import (
    StoreConflict,
    StoreError,
    StoreUnavailable,
    classify,
    is_busy,
    is_unavailable,
    name_operation,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- classify
def _operational() -> sa_exc.OperationalError:
    return sa_exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))


def test_driver_errors_that_mean_unreachable_are_store_unavailable() -> None:
    for error in (
        _operational(),
        sa_exc.InterfaceError("SELECT 1", {}, Exception("connection already closed")),
        sa_exc.TimeoutError("QueuePool limit of size 5 overflow 5 reached"),
    ):
        classified = classify(error, "reserve")
        assert isinstance(classified, StoreUnavailable), error
        assert str(classified).startswith("store unavailable: reserve: "), str(classified)


def test_other_driver_errors_stay_store_errors() -> None:
    error = sa_exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
    classified = classify(error, "upsert node")
    assert type(classified) is StoreError
    assert str(classified) == "store upsert node: (builtins.Exception) duplicate key"


class _PgError(Exception):
    """A psycopg error: what the server answered, with its SQLSTATE."""

    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [
        ("40P01", "deadlock detected"),
        ("40001", "could not serialize access due to concurrent update"),
        ("57014", "canceling statement due to statement timeout"),
    ],
)
def test_a_busy_postgresql_server_is_a_store_error_not_unavailable(
    sqlstate: str, message: str
) -> None:
    error = sa_exc.OperationalError("UPDATE devices", {}, _PgError(message, sqlstate))
    classified = classify(error, "reserve")
    assert type(classified) is StoreError, sqlstate
    assert not is_unavailable(error)
    assert is_busy(error)
    assert str(classified).startswith("store reserve: "), str(classified)
    assert message in str(classified)


def test_sqlite_locked_is_a_store_error_not_unavailable() -> None:
    error = sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    classified = classify(error, "insert new nodes")
    assert type(classified) is StoreError
    assert not is_unavailable(error)
    assert is_busy(error)
    assert "database is locked" in str(classified)


def test_a_store_error_raised_from_a_busy_server_stays_a_store_error() -> None:
    try:
        try:
            raise sa_exc.OperationalError("COMMIT", {}, _PgError("deadlock detected", "40P01"))
        except sa_exc.OperationalError as exc:
            raise StoreError("deadlock detected", operation="reserve") from exc
    except StoreError as exc:
        classified = classify(exc)
    assert type(classified) is StoreError
    assert is_busy(classified)


def test_an_unreachable_postgresql_server_is_still_unavailable() -> None:
    # connection failure, admin shutdown, a lock not granted in time
    for sqlstate in ("08006", "57P01", "55P03"):
        error = sa_exc.OperationalError("SELECT 1", {}, _PgError("terminating", sqlstate))
        assert isinstance(classify(error), StoreUnavailable), sqlstate
        assert not is_busy(error)
    assert not is_busy(_operational())


def test_a_store_error_raised_from_an_unreachable_store_is_reclassified() -> None:
    try:
        try:
            raise _operational()
        except sa_exc.OperationalError as exc:
            raise StoreError("connection lost during commit", operation="reserve") from exc
    except StoreError as wrapped:
        classified = classify(wrapped)
    assert isinstance(classified, StoreUnavailable)
    assert str(classified) == "store unavailable: reserve: connection lost during commit"
    assert isinstance(classified.__cause__, sa_exc.OperationalError)


def test_the_stores_own_errors_are_kept_and_named_once() -> None:
    conflict = StoreConflict("node full")
    assert classify(conflict, "reserve") is conflict
    assert str(conflict) == "store reserve: node full"
    unavailable = name_operation(StoreUnavailable("refused"), "reserve")
    assert str(name_operation(unavailable, "other")) == "store unavailable: reserve: refused"


def test_an_engine_that_cannot_connect_raises_store_unavailable(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}")
    try:
        with pytest.raises(StoreUnavailable, match=r"^store unavailable: connect: "):
            engine.connect()
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- health
def test_readiness_fails_after_failures_in_a_row_and_returns_after_successes() -> None:
    health = StoreHealth(make_engine("sqlite://"), unready_after=3, ready_after=2)
    health.failed("refused")
    health.failed("refused")
    assert health.available  # two are not enough
    health.succeeded()  # and a success starts the count again
    health.failed("refused")
    health.failed("refused")
    assert health.available
    health.failed("refused")
    assert not health.available
    assert "unreachable since" in health.status().detail
    assert health.status().detail.endswith(": refused")
    health.succeeded()
    assert not health.available  # one good probe does not put it back
    health.failed("refused")
    health.succeeded()
    assert not health.available
    health.succeeded()
    assert health.available
    assert health.status().detail == "reachable"


def test_the_probe_answers_for_the_store(tmp_path: Path) -> None:
    good = StoreHealth(make_engine(f"sqlite:///{tmp_path / 'x.db'}"), unready_after=1)
    assert good.probe() and good.available
    bad = StoreHealth(make_engine(f"sqlite:///{tmp_path / 'no' / 'x.db'}"), unready_after=1)
    assert not bad.probe()
    assert not bad.available
    assert "unable to open database file" in bad.status().detail


# --------------------------------------------------------------------------- log
def test_one_line_per_key_per_interval_with_a_count_of_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    log = ThrottledLog(logging.getLogger("throttle-test"), interval_s=10.0, clock=clock)
    caplog.set_level(logging.WARNING, logger="throttle-test")
    written = [log.warning("unavailable", "store unavailable: %s", n) for n in range(5)]
    assert written == [True, False, False, False, False]
    assert log.warning("other", "another kind")  # keys do not hold each other back
    clock.now += 10.0
    assert log.warning("unavailable", "store unavailable: %s", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "store unavailable: 0",
        "another kind",
        "store unavailable: 5 (4 more like it since the last such line)",
    ]
    assert all(r.exc_info is None for r in caplog.records)
