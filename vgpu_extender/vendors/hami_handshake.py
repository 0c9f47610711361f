"""HAMi's node handshake (``device.CheckHealth``) for a vendor whose node agent registers
its devices in one annotation and answers in ``hami.io/node-handshake-<x>`` (Ascend's
``-<CW>``, Hygon's ``-dcu``, Iluvatar's ``-<CW>``), as pure functions of the value and
the time.

The agent writes ``Reported…`` (the DCU plugin ``"Reported " + time.String()``); the
scheduler answers ``Requesting_<2006-01-02 15:04:05>`` (local time) and refreshes the
node's devices; a request unanswered for 60 s leaves the devices usable only while the
node advertises the count resource. A ``Deleted_…`` value (HAMi v2.8/v2.9's clean-up)
reads as not registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vgpu_extender.vendors.base import HandshakeVerdict

REQUESTING = "Requesting"
#: HAMi v2.8 and v2.9 wrote this on clean-up instead of removing the key.
DELETED = "Deleted"
_SCHEDULER_FORMAT = "%Y-%m-%d %H:%M:%S"
#: How long the agent has to answer a request.
ANSWER_WITHIN = timedelta(seconds=60)
#: How often a node whose agent stopped answering is looked at again (HAMi's
#: registration loop runs every 15 s; the node may stop or start advertising devices
#: without any annotation changing).
SILENT_RECHECK = timedelta(seconds=30)
#: Past the 60 s, so that the look finds the answer overdue.
_MARGIN = timedelta(seconds=1)


def requesting_value(now: datetime) -> str:
    """What the scheduler writes: ``Requesting_2006-01-02 15:04:05``."""
    return f"{REQUESTING}_{now.strftime(_SCHEDULER_FORMAT)}"


def requested_at(value: str) -> datetime | None:
    """The time of a ``Requesting`` value (the text after its first ``_``, up to the next
    one, as HAMi splits it), or None when it is not one or does not parse."""
    if REQUESTING not in value:
        return None
    parts = value.split("_")
    if len(parts) < 2:
        return None
    try:
        return datetime.strptime(parts[1], _SCHEDULER_FORMAT)
    except ValueError:
        return None


def check_health(value: str, now: datetime, allocatable: int) -> tuple[bool, bool]:
    """HAMi's ``CheckHealth``: ``(healthy, need_update)``.

    A ``Requesting`` value under 60 seconds old, or an older one on a node still
    advertising devices, is healthy with nothing to refresh; an older one on a node with
    none is unhealthy. Anything else (the agent's ``Reported_…``, a stale ``Deleted_…``,
    no value) is healthy and asks for a refresh: the caller writes
    ``requesting_value(now)``. An unreadable ``Requesting`` time counts as long past.
    """
    if REQUESTING not in value:
        return True, True
    since = requested_at(value)
    if since is not None and now < since + ANSWER_WITHIN:
        return True, False
    return allocatable > 0, False


def wall_clock(now: datetime) -> datetime:
    """The naive wall-clock time HAMi formats (Go's local time): UTC for an aware
    ``now``, which is what a scheduler container without ``TZ`` runs in, and the same
    for every replica whatever its host's zone."""
    return now.astimezone(UTC).replace(tzinfo=None) if now.tzinfo is not None else now


def verdict(
    annotation: str,
    resource: str,
    agent: str,
    annotations: Mapping[str, str],
    now: datetime,
    allocatable: Callable[[], int],
) -> HandshakeVerdict:
    """The verdict on a node that registers the vendor, whose handshake is under
    ``annotation`` and whose ``agent`` (``plugin``, ``agent``) answers it. The agent's
    ``Reported_…`` (or no value) is answered with ``Requesting_<now>``; a ``Requesting``
    within 60 s is awaited; an older one leaves the devices usable only while the node
    advertises ``resource``; a ``Deleted_…`` is not registered until the agent reports."""
    value = annotations.get(annotation) or ""
    wall = wall_clock(now)
    if REQUESTING not in value and value.startswith(DELETED):
        return HandshakeVerdict(
            healthy=False,
            why=f"{annotation} is {value!r}: not registered until the {agent} reports",
        )
    if REQUESTING not in value:
        # Looked at again once the answer is overdue, whether or not the write is
        # seen come back.
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
        else f"{annotation} is {value!r}, unanswered for over "
        f"{ANSWER_WITHIN.seconds} s, and the node advertises no {resource}"
    )
    return HandshakeVerdict(healthy=healthy, recheck_at=now + SILENT_RECHECK, why=why)


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
        return verdict(self.annotation, self.resource, "agent", annotations, now, allocatable)
