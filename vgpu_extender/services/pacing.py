"""Long background passes cut into short bursts, so the verbs keep the interpreter.

One process serves the verbs and runs the reconcile. While a thread computes, another
that wants the interpreter back (the event loop, after each socket call of a request)
waits for it up to the switch interval, 5 ms, each time: a pass over 10,000 nodes that
runs for seconds made a filter wait for it dozens of times. A pass that stops after
each short burst of work and sleeps a little gives the interpreter to whoever waits
at once, so a verb waits at most one burst.

A verb hands the interpreter over again and again while it runs (NumPy lets go of it
around its larger operations), and a pass that takes it then would hold it for a whole
burst each time. So the verbs mark themselves in and out (``Foreground``), and a pass
that sees one under way, or one just done (prioritize follows filter), pauses at its
next clock reading, once it has done ``MIN_BURST_S`` of work since its last pause: so
it still moves on while the verbs come back to back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: Work between two pauses, at most (about: the clock is read every ``CHECK_EVERY`` items).
BURST_S = 0.001
#: The pause after a burst: long enough for a filter + prioritize pair at 10,000 nodes
#: to run through.
PAUSE_S = 0.004
#: Items between two readings of the clock.
CHECK_EVERY = 16
#: Work after a pause before a pass gives way to the verbs, at least.
MIN_BURST_S = 0.00025
#: How long after a verb a pass still gives way: the next verb of the pod (prioritize
#: after filter, bind after prioritize) comes within a round trip.
LINGER_S = 0.002


class Foreground:
    """Whether a verb is being answered, or was a moment ago (``linger_s``).

    ``enter`` and ``leave`` are called by the event loop, around each verb, and only
    there: one thread writes, the passes' threads read.
    """

    def __init__(
        self, *, linger_s: float = LINGER_S, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._linger_s = linger_s
        self._clock = clock
        self._in_flight = 0
        self._left = -math.inf

    def enter(self) -> None:
        self._in_flight += 1

    def leave(self) -> None:
        self._in_flight -= 1
        self._left = self._clock()

    def busy(self, now: float) -> bool:
        """Whether a verb is under way, or one ended less than ``linger_s`` before
        ``now`` (this object's clock)."""
        return self._in_flight > 0 or now - self._left < self._linger_s


class Pacer:
    """``tick()`` once per item of a pass; it sleeps ``pause_s`` once ``burst_s`` of work
    has gone by since the last pause, or sooner (after ``min_burst_s``) while the
    ``foreground`` is busy. The foreground shares the pacer's clock."""

    def __init__(
        self,
        *,
        burst_s: float = BURST_S,
        pause_s: float = PAUSE_S,
        check_every: int = CHECK_EVERY,
        foreground: Foreground | None = None,
        min_burst_s: float = MIN_BURST_S,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if burst_s <= 0 or pause_s < 0 or check_every < 1 or not 0 <= min_burst_s <= burst_s:
            raise ValueError(
                f"burst_s must be > 0, pause_s >= 0, check_every >= 1 and min_burst_s "
                f"within [0, burst_s], got {burst_s!r}, {pause_s!r}, {check_every!r}, "
                f"{min_burst_s!r}"
            )
        self._burst_s = burst_s
        self._pause_s = pause_s
        self._check_every = check_every
        self._foreground = foreground
        self._min_burst_s = min_burst_s
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
        now = self._clock()
        worked = now - self._since
        if worked >= self._burst_s or (
            worked >= self._min_burst_s
            and self._foreground is not None
            and self._foreground.busy(now)
        ):
            self.pause()

    def pause(self) -> None:
        """Pause now (after a long step that ``tick`` could not cut)."""
        self._sleep(self._pause_s)
        self.pauses += 1
        self._since = self._clock()
