"""The node handshake: the two time formats and HAMi's CheckHealth verdicts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from vgpu_extender.vendors.ascend import DEFAULT_CHIPS
from vgpu_extender.vendors.ascend.handshake import (
    AscendHandshake,
    check_health,
    handshake_annotation,
    reported_value,
    requested_at,
    requesting_value,
    wall_clock,
)
from vgpu_extender.vendors.base import HandshakeVerdict

NOW = datetime(2026, 8, 21, 10, 0, 1)


def test_the_two_formats() -> None:
    assert requesting_value(NOW) == "Requesting_2026-08-21 10:00:01"
    assert reported_value(NOW) == "Reported_2026.08.21 10:00:01"
    assert requested_at(requesting_value(NOW)) == NOW
    assert requested_at("Reported_2026.08.21 10:00:01") is None
    assert handshake_annotation(DEFAULT_CHIPS[0]) == "hami.io/node-handshake-Ascend910A"


@pytest.mark.parametrize(
    ("value", "age", "allocatable", "want"),
    [
        ("Reported_2026.08.21 10:00:01", 0, 0, (True, True)),
        ("Deleted_2025-03-31 11:19:29", 0, 0, (True, True)),
        ("", 0, 0, (True, True)),
        ("requesting", 0, 0, (True, True)),  # HAMi's test is case-sensitive
        (None, 59, 0, (True, False)),
        (None, 60, 0, (False, False)),
        (None, 60, 32, (True, False)),
        (None, 3600, 1, (True, False)),
        (None, -30, 0, (True, False)),  # a clock ahead: not yet stale
        ("Requesting_yesterday", 0, 0, (False, False)),
        ("Requesting_yesterday", 0, 4, (True, False)),
        ("Requesting", 0, 0, (False, False)),
    ],
)
def test_check_health(
    value: str | None, age: int, allocatable: int, want: tuple[bool, bool]
) -> None:
    written = requesting_value(NOW) if value is None else value
    assert check_health(written, NOW + timedelta(seconds=age), allocatable) == want


# -- the scheduler's verdicts (the Vendor's ``handshake``) -----------------------------

B3 = next(chip for chip in DEFAULT_CHIPS if chip.common_word == "Ascend910B3")
AWARE = NOW.replace(tzinfo=UTC)
REGISTERED = {"hami.io/node-register-Ascend910B3": "[]"}


def _never() -> int:
    raise AssertionError("allocatable read when not needed")


def _check(value: str | None, allocatable: Callable[[], int] = _never) -> HandshakeVerdict | None:
    annotations = dict(REGISTERED)
    if value is not None:
        annotations["hami.io/node-handshake-Ascend910B3"] = value
    return AscendHandshake(B3).check(annotations, AWARE, allocatable)


def test_the_verdict_answers_a_report_and_awaits_the_answer() -> None:
    verdict = _check("Reported_2026.08.21 10:00:00")
    assert verdict == HandshakeVerdict(
        healthy=True,
        write="Requesting_2026-08-21 10:00:01",
        recheck_at=AWARE + timedelta(seconds=61),
    )
    assert _check(None) == verdict
    waiting = _check("Requesting_2026-08-21 09:59:31")
    assert waiting == HandshakeVerdict(healthy=True, recheck_at=AWARE + timedelta(seconds=31))


def test_the_verdict_on_an_unanswered_request_reads_allocatable() -> None:
    stale = _check("Requesting_2026-08-21 09:59:00", lambda: 0)
    assert stale is not None and not stale.healthy and stale.write is None
    assert "huawei.com/Ascend910B3" in stale.why
    advertised = _check("Requesting_2026-08-21 09:59:00", lambda: 1)
    assert advertised is not None and advertised.healthy


def test_deleted_is_not_registered_and_a_node_without_the_chip_has_no_verdict() -> None:
    deleted = _check("Deleted_2025-03-31 11:19:29")
    assert deleted is not None and not deleted.healthy and deleted.write is None
    assert AscendHandshake(B3).check({}, AWARE, _never) is None


def test_aware_times_are_written_as_utc_wall_time() -> None:
    east = AWARE.astimezone(timezone(timedelta(hours=8)))
    verdict = AscendHandshake(B3).check(REGISTERED, east, _never)
    assert verdict is not None and verdict.write == "Requesting_2026-08-21 10:00:01"
    assert wall_clock(east) == NOW
