"""At most one log line per kind of failure per interval, with a count of the rest.

A store that goes away fails every request and every background pass at once; logging
each of them (with a traceback, as an unexpected error would be) buries the one line
that matters. ``ThrottledLog.warning(key, ...)`` writes the first failure of ``key``
and then nothing for that key until ``interval_s`` has passed; the next line it writes
says how many it held back. Never with a traceback: the message is the whole story.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The interval the extender's own failures are throttled to.
DEFAULT_INTERVAL_S = 10.0


@dataclass(slots=True)
class _Key:
    last: float
    held: int = 0


class ThrottledLog:
    """Writes to ``logger``, one line per key per ``interval_s``."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, _Key] = {}

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        """Write ``message % args`` unless ``key`` was written within the interval; True
        when written."""
        now = self._clock()
        with self._lock:
            state = self._keys.get(key)
            if state is not None and now - state.last < self._interval_s:
                state.held += 1
                return False
            held = state.held if state is not None else 0
            self._keys[key] = _Key(last=now)
        if held:
            message = f"{message} ({held} more like it since the last such line)"
        self._logger.log(level, message, *args)
        return True

    def warning(self, key: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, message, *args)

    def error(self, key: str, message: str, *args: object) -> bool:
        return self.log(logging.ERROR, key, message, *args)
