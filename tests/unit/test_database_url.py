"""Database URLs: libpq multi-host forms accepted and written one way, bad host lists
refused naming the problem, and the connection defaults that make a failover quick."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from vgpu_extender import store
from vgpu_extender.settings import Settings
from vgpu_extender.store.database import POSTGRES_CONNECT_DEFAULTS

TWO = "127.0.0.1,127.0.0.1"


def _driver_args(url: str) -> dict[str, Any]:
    """What the driver is handed to connect with (host, port, libpq options)."""
    engine = store.make_engine(url)
    captured: dict[str, Any] = {}

    @event.listens_for(engine, "do_connect")
    def _capture(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        captured.update(cparams)
        raise ConnectionAbortedError("captured")

    with pytest.raises(Exception, match="captured"):
        engine.connect()
    engine.dispose()
    return captured


@pytest.mark.parametrize(
    "query",
    [
        "host=127.0.0.1:5433,127.0.0.1:5434",
        "host=127.0.0.1:5433&host=127.0.0.1:5434",
        "host=127.0.0.1,127.0.0.1&port=5433,5434",
    ],
    ids=["libpq-pairs", "repeated", "separate"],
)
def test_multi_host_forms_reach_the_driver_as_libpq_lists(query: str) -> None:
    url = f"postgresql+psycopg://postgres@/test?{query}&target_session_attrs=read-write"
    Settings(database_url=url)  # the setting accepts it
    cparams = _driver_args(url)
    assert (cparams["host"], cparams["port"]) == (TWO, "5433,5434")
    assert cparams["target_session_attrs"] == "read-write"
    assert cparams["dbname"] == "test"


def test_ipv6_and_portless_hosts_keep_their_colons() -> None:
    cparams = _driver_args("postgresql://u@/db?host=[::1]:5433,db2")
    assert (cparams["host"], cparams["port"]) == ("::1,db2", "5433,")


def test_a_single_host_url_is_left_as_it_was() -> None:
    url = "postgresql+psycopg://postgres@db:5432/test"
    assert store.parse_url(url).render_as_string() == url


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("host=a,b&port=1", "2 hosts but 1 ports"),
        ("host=a:x", "port 'x' of host 'a' is not a port number"),
        ("host=a:70000", "not a port number"),
        ("host=a:1&port=2", "either as host=H:P or in port="),
        ("host=a,,b", "an empty host name"),
    ],
)
def test_bad_host_lists_are_refused_naming_the_problem(query: str, problem: str) -> None:
    with pytest.raises(store.StoreInputError, match="bad host list") as raised:
        store.parse_url(f"postgresql+psycopg://u:s3cret@/db?{query}")
    assert problem in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_failover_friendly_defaults_apply_unless_the_url_sets_them() -> None:
    cparams = _driver_args("postgresql+psycopg://u@db/test")
    assert {k: cparams[k] for k in POSTGRES_CONNECT_DEFAULTS} == POSTGRES_CONNECT_DEFAULTS
    mine = _driver_args("postgresql+psycopg://u@db/test?connect_timeout=30&keepalives=0")
    assert (mine["connect_timeout"], mine["keepalives"]) == ("30", "0")
    assert mine["keepalives_idle"] == POSTGRES_CONNECT_DEFAULTS["keepalives_idle"]


def test_sqlite_gets_no_libpq_options() -> None:
    engine = store.make_engine("sqlite://")
    with engine.connect():
        pass
    engine.dispose()
