"""Exponential backoff with full jitter, for anything retried against a server.

A fixed retry delay from many replicas (or many watch threads) hits a server that is
coming back in lock-step, and logs a line per try; doubling the ceiling spreads the
tries out, and drawing each delay anywhere below it ("full jitter") keeps replicas from
synchronising. The random source and the clock are injected so schedules can be
checked without sleeping.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

#: The API server's watches: a first retry soon, never more than 30 s apart.
DEFAULT_INITIAL_S = 0.5
DEFAULT_CAP_S = 30.0


class Backoff:
    """Delays ``uniform(0, min(cap_s, initial_s * factor**n))`` for the n-th retry.

    ``reset()`` after a healthy period starts the schedule again from ``initial_s``.
    """

    def __init__(
        self,
        *,
        initial_s: float = DEFAULT_INITIAL_S,
        cap_s: float = DEFAULT_CAP_S,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial_s <= 0 or cap_s < initial_s or factor < 1:
            raise ValueError("need 0 < initial_s <= cap_s and factor >= 1")
        self.initial_s = initial_s
        self.cap_s = cap_s
        self.factor = factor
        self._rng = rng if rng is not None else random.Random()
        #: Retries handed out since the start or the last reset.
        self.attempts = 0

    def ceiling(self) -> float:
        """The largest delay the next retry may get."""
        # min() on the exponent first: a long outage must not overflow the float.
        exponent = min(self.attempts, 64)
        return min(self.cap_s, self.initial_s * self.factor**exponent)

    def next_delay(self) -> float:
        """The delay before the next retry; each call moves the schedule on."""
        delay = self._rng.uniform(0.0, self.ceiling())
        self.attempts += 1
        return delay

    def reset(self) -> None:
        self.attempts = 0


class HealthyReset:
    """Resets a ``Backoff`` once a connection has stayed up ``healthy_s``: a watch that
    breaks after an hour retries soon, one that breaks at once keeps backing off."""

    def __init__(
        self,
        backoff: Backoff,
        *,
        healthy_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = backoff
        self._healthy_s = healthy_s
        self._clock = clock
        self._since: float | None = None

    def connected(self) -> None:
        """The connection is up (called each time it starts). A watch renewed without a
        failure in between (it ends by its own timeout) is the same healthy spell: it
        counts from the first start after the last failure."""
        if self._since is None:
            self._since = self._clock()

    def failed(self) -> float:
        """The connection broke: the delay before the next try."""
        if self._since is not None and self._clock() - self._since >= self._healthy_s:
            self.backoff.reset()
        self._since = None
        return self.backoff.next_delay()
