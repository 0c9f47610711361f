"""The engine's errors as the store reports them (``store.health``), and the error
counter ``StoreHealth`` feeds from them between ``start`` and ``stop``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from vgpu_extender.services.store_health import STORE_FAILURES, StoreHealth
from vgpu_extender.store import make_engine
from vgpu_extender.store.errors import StoreError
from vgpu_extender.store.health import EngineError, listen_errors, ping
from vgpu_extender.store.sessions import Engine


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return make_engine(f"sqlite:///{tmp_path / 'x.db'}")


def _fail(engine: Engine) -> None:
    with pytest.raises(sa_exc.OperationalError), engine.connect() as connection:
        connection.execute(text("SELECT * FROM no_such_table"))


def test_every_engine_error_reaches_the_hook_until_stopped(engine: Engine) -> None:
    seen: list[EngineError] = []
    stop = listen_errors(engine, seen.append)
    _fail(engine)
    assert len(seen) == 1
    assert "no_such_table" in str(seen[0].error)
    assert not seen[0].is_pre_ping
    assert not seen[0].is_disconnect
    stop()
    stop()  # twice does nothing
    _fail(engine)
    assert len(seen) == 1


def test_the_probe_runs_on_a_reachable_store(engine: Engine) -> None:
    ping(engine)  # raises on failure


def test_store_health_counts_engine_errors_only_while_started(engine: Engine) -> None:
    counted: list[None] = []
    health = StoreHealth(engine, interval_s=3600.0, on_error=lambda: counted.append(None))
    _fail(engine)
    assert counted == []
    health.start()
    try:
        _fail(engine)
        _fail(engine)
        assert len(counted) == 2
        assert health.available  # a refused statement is no outage
    finally:
        health.stop()
    _fail(engine)
    assert len(counted) == 2


def test_the_failures_the_api_answers_are_the_store_and_driver_errors() -> None:
    assert set(STORE_FAILURES) == {StoreError, sa_exc.SQLAlchemyError}
