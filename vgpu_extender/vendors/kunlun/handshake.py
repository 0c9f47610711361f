"""The vXPU node handshake (``hami.io/node-handshake-xpu``): HAMi's ``CheckHealth``, the
protocol the Ascend chips use, over the vXPU registration and count resource."""

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
from vgpu_extender.vendors.kunlun.inventory_codec import REGISTER_ANNOTATION

HANDSHAKE_ANNOTATION = "hami.io/node-handshake-xpu"
#: Past the 60 s, so that the look finds the answer overdue.
_MARGIN = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class VxpuHandshake:
    """The scheduler's side, as a ``NodeHandshake``."""

    resource: str = "kunlunxin.com/vxpu"
    annotation: str = HANDSHAKE_ANNOTATION

    def check(
        self, annotations: Mapping[str, str], now: datetime, allocatable: Callable[[], int]
    ) -> HandshakeVerdict | None:
        """None on a node that registers no vXPUs; the plugin's report is answered with
        ``Requesting_<now>``; an answer overdue 60 s leaves the XPUs usable only while the
        node advertises some; a ``Deleted_…`` (HAMi v2.8/v2.9) awaits a new report."""
        if REGISTER_ANNOTATION not in annotations:
            return None
        value = annotations.get(self.annotation) or ""
        wall = wall_clock(now)
        if REQUESTING not in value and value.startswith(DELETED):
            return HandshakeVerdict(
                healthy=False,
                why=f"{self.annotation} is {value!r}: not registered until the plugin reports",
            )
        if REQUESTING not in value:
            return HandshakeVerdict(
                healthy=True, write=requesting_value(wall), recheck_at=now + ANSWER_WITHIN + _MARGIN
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
