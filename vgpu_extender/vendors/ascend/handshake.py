"""The node handshake between HAMi's scheduler and the Ascend device plugin
(``hami.io/node-handshake-<CW>``), as pure functions of the value and the time.

The plugin writes ``Reported_<2006.01.02 15:04:05>`` on each registration; the scheduler
answers ``Requesting_<2006-01-02 15:04:05>`` (local time) and refreshes the node's
devices. A ``Requesting`` value the plugin has not replaced within 60 seconds marks the
node unhealthy, unless the node still advertises NPUs (allocatable count above 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.ascend.inventory_codec import register_annotation
from vgpu_extender.vendors.base import HandshakeVerdict

REQUESTING = "Requesting"
REPORTED = "Reported"
#: HAMi v2.8 and v2.9 wrote this on clean-up instead of removing the key.
DELETED = "Deleted"
_SCHEDULER_FORMAT = "%Y-%m-%d %H:%M:%S"
_PLUGIN_FORMAT = "%Y.%m.%d %H:%M:%S"
#: How long the plugin has to answer a request.
ANSWER_WITHIN = timedelta(seconds=60)
#: How often a node whose plugin stopped answering is looked at again (HAMi's
#: registration loop runs every 15 s; the node may stop or start advertising NPUs
#: without any annotation changing).
SILENT_RECHECK = timedelta(seconds=30)
#: Past the 60 s, so that the look finds the answer overdue.
_MARGIN = timedelta(seconds=1)


def handshake_annotation(chip: ChipConfig) -> str:
    return f"hami.io/node-handshake-{chip.common_word}"


def requesting_value(now: datetime) -> str:
    """What the scheduler writes: ``Requesting_2006-01-02 15:04:05``."""
    return f"{REQUESTING}_{now.strftime(_SCHEDULER_FORMAT)}"


def reported_value(now: datetime) -> str:
    """What the plugin writes: ``Reported_2006.01.02 15:04:05``."""
    return f"{REPORTED}_{now.strftime(_PLUGIN_FORMAT)}"


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
    advertising NPUs, is healthy with nothing to refresh; an older one on a node with
    none is unhealthy. Anything else (the plugin's ``Reported_…``, a stale ``Deleted_…``,
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


@dataclass(frozen=True, slots=True)
class AscendHandshake:
    """The scheduler's side of one chip's handshake, as a ``NodeHandshake``: the verdict
    on a node that registers the chip, and what to write there."""

    chip: ChipConfig

    @property
    def annotation(self) -> str:
        return handshake_annotation(self.chip)

    @property
    def resource(self) -> str:
        return self.chip.resource_name

    def check(
        self, annotations: Mapping[str, str], now: datetime, allocatable: Callable[[], int]
    ) -> HandshakeVerdict | None:
        """None on a node that does not register the chip (nothing is written there).
        A plugin's ``Reported_…`` (or no value) is answered with ``Requesting_<now>``;
        a ``Requesting`` within 60 s is awaited; an older one leaves the NPUs usable only
        while the node advertises some; a ``Deleted_…`` (HAMi v2.8/v2.9 cleaned the node
        up) is a chip not registered until the plugin reports again."""
        if register_annotation(self.chip) not in annotations:
            return None
        value = annotations.get(self.annotation) or ""
        wall = wall_clock(now)
        if REQUESTING not in value and value.startswith(DELETED):
            return HandshakeVerdict(
                healthy=False,
                why=f"{self.annotation} is {value!r}: not registered until the plugin reports",
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
        advertised = allocatable()
        healthy, _ = check_health(value, wall, advertised)
        why = (
            ""
            if healthy
            else f"{self.annotation} is {value!r}, unanswered for over "
            f"{ANSWER_WITHIN.seconds} s, and the node advertises no {self.resource}"
        )
        return HandshakeVerdict(healthy=healthy, recheck_at=now + SILENT_RECHECK, why=why)
