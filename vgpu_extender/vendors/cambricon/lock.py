"""Cambricon's node lock at Bind: its own node annotation ``cambricon.com/dsmlu.lock``
(not HAMi's shared ``hami.io/mutex.lock``) holding an RFC3339 time, taken only when an
app container (init containers are not looked at) asks for MLUs, refused while a lock
under 2 minutes old is there, and replaced once older."""

from __future__ import annotations

from datetime import datetime, timedelta

from vgpu_extender.domain import PodRequest

LOCK_ANNOTATION = "cambricon.com/dsmlu.lock"
LOCK_EXPIRES_AFTER = timedelta(minutes=2)


def needs_lock(request: PodRequest, word: str) -> bool:
    """Whether HAMi's ``LockNode`` takes the lock for this pod."""
    return any(
        ask.vendor == word and ask.count > 0
        for container in request.containers
        if not container.init
        for ask in container.asks
    )


def lock_value(now: datetime) -> str:
    """Go's ``time.Now().Format(time.RFC3339)``: seconds, and ``Z`` for UTC."""
    text = now.isoformat(timespec="seconds")
    return text.replace("+00:00", "Z")


def lock_held(value: str, now: datetime) -> bool:
    """Whether a lock of ``value`` still stands at ``now`` (aware); an unreadable one
    raises ``ValueError`` (HAMi refuses the bind)."""
    taken = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if taken.tzinfo is None:
        raise ValueError(f"{LOCK_ANNOTATION} {value!r} is not an RFC3339 time")
    return now - taken <= LOCK_EXPIRES_AFTER
