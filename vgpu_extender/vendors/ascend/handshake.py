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
from datetime import datetime

from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.ascend.inventory_codec import register_annotation
from vgpu_extender.vendors.base import HandshakeVerdict
from vgpu_extender.vendors.hami_handshake import (
    ANSWER_WITHIN,
    DELETED,
    REQUESTING,
    SILENT_RECHECK,
    check_health,
    requested_at,
    requesting_value,
    verdict,
    wall_clock,
)

REPORTED = "Reported"
_PLUGIN_FORMAT = "%Y.%m.%d %H:%M:%S"


def handshake_annotation(chip: ChipConfig) -> str:
    return f"hami.io/node-handshake-{chip.common_word}"


def reported_value(now: datetime) -> str:
    """What the plugin writes: ``Reported_2006.01.02 15:04:05``."""
    return f"{REPORTED}_{now.strftime(_PLUGIN_FORMAT)}"


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
        return verdict(self.annotation, self.resource, "plugin", annotations, now, allocatable)


__all__ = [
    "ANSWER_WITHIN",
    "DELETED",
    "REPORTED",
    "REQUESTING",
    "SILENT_RECHECK",
    "AscendHandshake",
    "check_health",
    "handshake_annotation",
    "reported_value",
    "requested_at",
    "requesting_value",
    "wall_clock",
]
