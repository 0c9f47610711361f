"""The node handshake keyed by names (Hygon's ``hami.io/node-handshake-dcu``): a node
without the vendor's registration is not looked at, a plugin's report is answered with
``Requesting_<time>``, a request is awaited 60 s, then only an advertised count keeps
the node usable, and HAMi v2.8/v2.9's ``Deleted_`` reads as unregistered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from vgpu_extender.vendors.hami_handshake import RegisterHandshake

SHAKE = RegisterHandshake(
    "hami.io/node-handshake-dcu", "hygon.com/dcunum", "hami.io/node-dcu-register"
)
NOW = datetime(2026, 3, 31, 11, 19, 29, tzinfo=UTC)
REGISTERED = {"hami.io/node-dcu-register": "DCU-1,4,1,100,DCU,0,true:"}


def _never() -> int:
    raise AssertionError("allocatable read when not needed")


def test_a_node_without_the_registration_is_not_looked_at() -> None:
    assert SHAKE.check({"hami.io/node-handshake-dcu": "Reported x"}, NOW, _never) is None


def test_the_plugins_report_is_answered() -> None:
    value = "Reported 2026-03-31 11:19:00.123 +0000 UTC m=+12.5"
    verdict = SHAKE.check({**REGISTERED, "hami.io/node-handshake-dcu": value}, NOW, _never)
    assert verdict is not None and verdict.healthy
    assert verdict.write == "Requesting_2026-03-31 11:19:29"


def test_no_value_is_answered_too() -> None:
    verdict = SHAKE.check(REGISTERED, NOW, _never)
    assert verdict is not None and verdict.write == "Requesting_2026-03-31 11:19:29"


def test_a_fresh_request_is_awaited() -> None:
    value = "Requesting_2026-03-31 11:19:00"
    verdict = SHAKE.check({**REGISTERED, "hami.io/node-handshake-dcu": value}, NOW, _never)
    assert verdict is not None and verdict.healthy and verdict.write is None
    assert verdict.recheck_at is not None and verdict.recheck_at > NOW


def test_an_unanswered_request_needs_an_advertised_count() -> None:
    old = (NOW - timedelta(seconds=61)).strftime("Requesting_%Y-%m-%d %H:%M:%S")
    annotations = {**REGISTERED, "hami.io/node-handshake-dcu": old}
    usable = SHAKE.check(annotations, NOW, lambda: 4)
    silent = SHAKE.check(annotations, NOW, lambda: 0)
    assert usable is not None and usable.healthy
    assert silent is not None and not silent.healthy
    assert "hygon.com/dcunum" in silent.why


def test_a_deleted_mark_is_unregistered() -> None:
    value = "Deleted_2025-03-31 11:19:29"
    verdict = SHAKE.check({**REGISTERED, "hami.io/node-handshake-dcu": value}, NOW, _never)
    assert verdict is not None and not verdict.healthy and verdict.write is None
