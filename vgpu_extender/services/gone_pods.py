"""Pods the watch has seen go, so that an older listing cannot bring them back.

A reconcile pass works from a listing taken before it began; at 66,000 pods the pass
takes seconds. A pod deleted (or finished) meanwhile is released by the pod watch, but
the listing still shows it running and bound, and without this the pass would import
its devices again, holding them until the next pass. A pod's UID never comes back once
it is deleted, and a finished pod never runs again, so a UID seen gone is never imported
again, by any listing. Kept for ``keep_s`` (far longer than a pass) and at most ``most``
UIDs, the oldest going first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: How long a gone pod is remembered: any listing a pass still works from is younger.
KEEP_S = 600.0
#: UIDs remembered at most (a burst of deletions beyond it forgets the oldest).
MOST = 100_000


class GonePods:
    """UIDs of pods seen deleted or finished, thread-safe (the watch records them, the
    reconcile asks)."""

    def __init__(
        self,
        *,
        keep_s: float = KEEP_S,
        most: int = MOST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if keep_s <= 0 or most < 1:
            raise ValueError(f"keep_s must be > 0 and most >= 1, got {keep_s!r}, {most!r}")
        self._keep_s = keep_s
        self._most = most
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, uid: str) -> None:
        now = self._clock()
        with self._lock:
            self._seen[uid] = now
            self._seen.move_to_end(uid)
            self._expire(now)

    def __contains__(self, uid: object) -> bool:
        with self._lock:
            self._expire(self._clock())
            return uid in self._seen

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def _expire(self, now: float) -> None:
        seen = self._seen
        while seen and (len(seen) > self._most or now - next(iter(seen.values())) > self._keep_s):
            seen.popitem(last=False)
