"""The node handshake: the two time formats and HAMi's CheckHealth verdicts."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from vgpu_extender.vendors.ascend import DEFAULT_CHIPS
from vgpu_extender.vendors.ascend.handshake import (
    check_health,
    handshake_annotation,
    reported_value,
    requested_at,
    requesting_value,
)

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
