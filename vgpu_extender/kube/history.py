"""The bounded change log behind in-memory watches, as etcd's revision history is.

A watch from a revision replays every change after it; once the log has dropped
changes (its limit, or an explicit compaction), a watch from an older revision fails
with 410 Gone, and the client must list again. Not thread-safe by itself: the store
that owns it holds its lock around every call.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from vgpu_extender.kube.client import WatchEvent, WatchEventType
from vgpu_extender.kube.errors import WatchExpired
from vgpu_extender.kube.objects import KubeObject


@dataclass(frozen=True, slots=True)
class Change:
    """One write. ``old`` is None for a create; for a delete ``new`` is the last state."""

    revision: int
    kind: str
    old: KubeObject | None
    new: KubeObject
    deleted: bool = False

    def as_event(self, matches: Callable[[KubeObject | None], bool]) -> WatchEvent | None:
        """The event a watch filtered by ``matches`` sees, as the API server's cacher does.

        An object that starts matching is ADDED, one that stops matching is DELETED.
        """
        was, now = matches(self.old), matches(self.new)
        if self.deleted:
            event: WatchEventType | None = "DELETED" if was else None
        elif was:
            event = "MODIFIED" if now else "DELETED"
        else:
            event = "ADDED" if now else None
        return None if event is None else (event, copy.deepcopy(self.new))


class ChangeLog:
    """The last ``limit`` changes, oldest first."""

    def __init__(self, limit: int, *, start: int) -> None:
        if limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {limit!r}")
        self._changes: deque[Change] = deque()
        self._limit = limit
        self._compacted = start  # every change after this revision is still here

    def append(self, change: Change) -> None:
        self._changes.append(change)
        while len(self._changes) > self._limit:
            self._compacted = self._changes.popleft().revision

    def require(self, cursor: int) -> None:
        """``WatchExpired`` if changes after ``cursor`` were dropped."""
        if cursor < self._compacted:
            raise WatchExpired(
                f"too old resource version: {cursor} ({self._compacted + 1})",
                status=410,
                reason="Expired",
            )

    def after(self, cursor: int) -> list[Change]:
        """Changes after ``cursor``, oldest first; ``WatchExpired`` if some were dropped."""
        self.require(cursor)
        newer: list[Change] = []
        for change in reversed(self._changes):  # walk back only as far as needed
            if change.revision <= cursor:
                break
            newer.append(change)
        newer.reverse()
        return newer

    def compact(self, revision: int) -> None:
        """Drop everything up to ``revision``."""
        self._changes.clear()
        self._compacted = revision
