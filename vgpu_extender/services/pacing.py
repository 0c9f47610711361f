"""Long background passes cut into short bursts, so the verbs keep the interpreter.

One process serves the verbs and runs the reconcile. While a thread computes, another
that wants the interpreter back (the event loop, after each socket call of a request)
waits for it up to the switch interval, 5 ms, each time: a pass over 10,000 nodes that
runs for seconds made a filter wait for it dozens of times. A pass that stops after
each short burst of work and sleeps a little gives the interpreter to whoever waits
at once, so a verb waits at most one burst.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Work between two pauses, at most (about: the clock is read every ``CHECK_EVERY`` items).
BURST_S = 0.001
#: The pause after a burst: long enough for a filter + prioritize pair at 10,000 nodes
#: to run through.
PAUSE_S = 0.004
#: Items between two readings of the clock.
CHECK_EVERY = 16


class Pacer:
    """``tick()`` once per item of a pass; it sleeps ``pause_s`` once ``burst_s`` of work
    has gone by since the last pause."""

    def __init__(
        self,
        *,
        burst_s: float = BURST_S,
        pause_s: float = PAUSE_S,
        check_every: int = CHECK_EVERY,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if burst_s <= 0 or pause_s < 0 or check_every < 1:
            raise ValueError(
                f"burst_s must be > 0, pause_s >= 0 and check_every >= 1, got {burst_s!r}, "
                f"{pause_s!r}, {check_every!r}"
            )
        self._burst_s = burst_s
        self._pause_s = pause_s
        self._check_every = check_every
        self._clock = clock
        self._sleep = sleep
        self._count = 0
        self._since = clock()
        #: How many pauses this pacer made.
        self.pauses = 0

    def tick(self) -> None:
        self._count += 1
        if self._count % self._check_every:
            return
        if self._clock() - self._since >= self._burst_s:
            self.pause()

    def pause(self) -> None:
        """Pause now (after a long step that ``tick`` could not cut)."""
        self._sleep(self._pause_s)
        self.pauses += 1
        self._since = self._clock()
