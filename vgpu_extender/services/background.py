"""A bounded queue with one worker thread: work a request hands off and never waits for.

``submit`` never blocks the caller: when the queue is full the item is dropped and
counted, since what goes through here (pod Events, marking rows bound) is not worth
slowing a verb for. ``BatchWorker`` hands over what is queued in batches;
``QueueWorker`` hands items over one at a time, in the order they came.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class BatchWorker(Generic[_T]):
    """Hands submitted items to ``handle`` in a daemon thread named ``name``, up to
    ``batch`` at once: what is queued, plus what arrives within ``linger_s`` of the
    first item (one database transaction for many pods, say).

    ``on_drop`` is called for each item refused by a full queue; it may be replaced
    after construction (the metrics attach once the app is up).
    """

    def __init__(
        self,
        handle: Callable[[list[_T]], None],
        *,
        name: str,
        batch: int = 1,
        linger_s: float = 0.0,
        capacity: int = 1024,
        on_drop: Callable[[], None] = lambda: None,
    ) -> None:
        self._handle = handle
        self._batch = batch
        self._linger_s = linger_s
        self._name = name
        self.on_drop = on_drop
        # None is the stop sign: it queues behind the items already submitted.
        self._queue: queue.Queue[_T | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None

    def submit(self, item: _T) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.on_drop()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Let the worker finish what was submitted before, then end it.

        Waits at most about ``timeout_s`` twice (for room in the queue, then for the
        thread); a worker stuck longer is left behind as a daemon.
        """
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout_s)
        self._thread = None

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            items, stop = self._gather(first)
            try:
                self._handle(items)
            except Exception:  # one bad item must not end the worker
                logger.exception("%s: handling an item failed", self._name)
            if stop:
                return

    def _gather(self, first: _T) -> tuple[list[_T], bool]:
        """``first`` and what follows it within the batch and the linger; whether the
        stop sign came among them."""
        if self._linger_s > 0:
            # Sleep through the linger, then take what came: waiting on the queue
            # instead would wake this thread once for every item.
            time.sleep(self._linger_s)
        items = [first]
        while len(items) < self._batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return items, True
            items.append(item)
        return items, False


class QueueWorker(BatchWorker[_T]):
    """A ``BatchWorker`` that hands items to ``handle`` one at a time, in order."""

    def __init__(
        self,
        handle: Callable[[_T], None],
        *,
        name: str,
        capacity: int = 1024,
        on_drop: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(
            lambda items: handle(items[0]), name=name, capacity=capacity, on_drop=on_drop
        )
