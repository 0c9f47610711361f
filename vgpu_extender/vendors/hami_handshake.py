"""HAMi's node handshake (``device.CheckHealth``) for a vendor whose node agent registers
its devices in one annotation and answers in ``hami.io/node-handshake-<x>`` (Hygon's
``-dcu``, Iluvatar's ``-<CW>``): the same rules as Ascend's, keyed by names instead of
a chip.

The agent writes ``Reported…`` (the DCU plugin ``"Reported " + time.String()``); the
scheduler answers ``Requesting_<2006-01-02 15:04:05>``; a request unanswered for 60 s
leaves the devices usable only while the node advertises the count resource. A
``Deleted_…`` value (HAMi v2.8/v2.9's clean-up) reads as not registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from vgpu_extender.vendors.ascend.handshake import (
    ANSWER_WITHIN,
    DELETED,
    REQUESTING,
    SILENT_RECHECK,
    check_health,
    requested_at,
    requesting_value,
    wall_clock,
)
from vgpu_extender.vendors.base import HandshakeVerdict

#: Past the 60 s, so that the look finds the answer overdue.
_MARGIN = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class RegisterHandshake:
    """A ``NodeHandshake``: ``annotation`` is the handshake key, ``resource`` the count
    resource whose allocatable keeps a silent node usable, ``register`` the inventory
    key whose presence says the node carries the vendor."""

    annotation: str
    resource: str
    register: str

    def check(
        self, annotations: Mapping[str, str], now: datetime, allocatable: Callable[[], int]
    ) -> HandshakeVerdict | None:
        if self.register not in annotations:
            return None
        value = annotations.get(self.annotation) or ""
        wall = wall_clock(now)
        if REQUESTING not in value and value.startswith(DELETED):
            return HandshakeVerdict(
                healthy=False,
                why=f"{self.annotation} is {value!r}: not registered until the agent reports",
            )
        if REQUESTING not in value:
            return HandshakeVerdict(
                healthy=True,
                write=requesting_value(wall),
                recheck_at=now + ANSWER_WITHIN + _MARGIN,
            )
        since = requested_at(value)
        if since is not None and wall < since + ANSWER_WITHIN:
            return HandshakeVerdict(
                healthy=True, recheck_at=now + (since + ANSWER_WITHIN + _MARGIN - wall)
            )
        healthy, _ = check_health(value, wall, allocatable())
        why = (
            ""
            if healthy
            else f"{self.annotation} is {value!r}, unanswered for over "
            f"{ANSWER_WITHIN.seconds} s, and the node advertises no {self.resource}"
        )
        return HandshakeVerdict(healthy=healthy, recheck_at=now + SILENT_RECHECK, why=why)
