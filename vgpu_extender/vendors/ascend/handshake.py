"""The node handshake between HAMi's scheduler and the Ascend device plugin
(``hami.io/node-handshake-<CW>``), as pure functions of the value and the time.

The plugin writes ``Reported_<2006.01.02 15:04:05>`` on each registration; the scheduler
answers ``Requesting_<2006-01-02 15:04:05>`` (local time) and refreshes the node's
devices. A ``Requesting`` value the plugin has not replaced within 60 seconds marks the
node unhealthy, unless the node still advertises NPUs (allocatable count above 0).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from vgpu_extender.vendors.ascend.chips import ChipConfig

REQUESTING = "Requesting"
REPORTED = "Reported"
#: HAMi v2.8 and v2.9 wrote this on clean-up instead of removing the key.
DELETED = "Deleted"
_SCHEDULER_FORMAT = "%Y-%m-%d %H:%M:%S"
_PLUGIN_FORMAT = "%Y.%m.%d %H:%M:%S"
#: How long the plugin has to answer a request.
ANSWER_WITHIN = timedelta(seconds=60)


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
