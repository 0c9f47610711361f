"""Writes to one key, one batch at a time: whatever queued meanwhile goes in the next.

Binds to one node must reach the store one after the other (each re-checks the fit
against the ones before), and kube-scheduler often sends many to one node at once:
a packing policy fills a node before it starts the next. Taking turns one pod per
transaction makes that node's transaction time the cap on binds per second. Here one
thread at a time writes for a key: it takes every item queued for the key by then
(its own first among them) and writes them together, so one transaction serves as
many binds as arrived while the previous one ran. No thread waits for a batch to
fill: a lone item is written at once, alone.

The writer then wakes the threads whose items it wrote, all at once, and hands the
turn to the oldest thread still waiting, if any: no thread wakes only to find its item
written and pass the turn on.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

#: Items written in one batch at most; the rest wait for the next turn.
DEFAULT_LIMIT = 64


@dataclass(slots=True)
class _Ticket(Generic[T]):
    item: T
    #: Set when the item is written, or when its thread is handed the turn.
    woken: threading.Event = field(default_factory=threading.Event)
    written: bool = False


class Batches(Generic[T]):
    """Per key, a queue of items and a turn to write them.

    ``write(key, items)`` writes one batch, in queue order; it must settle every item
    it is given (record each one's outcome on the item), even when it raises.
    """

    def __init__(
        self, write: Callable[[str, list[T]], None], *, limit: int = DEFAULT_LIMIT
    ) -> None:
        if limit < 1:
            raise ValueError(f"batch limit must be at least 1, got {limit}")
        self._write = write
        self._limit = limit
        self._lock = threading.Lock()
        #: Items waiting, per key with a writer; a key is here exactly while it has one.
        self._queued: dict[str, deque[_Ticket[T]]] = {}

    def submit(self, key: str, item: T) -> None:
        """Queue ``item`` for ``key`` and return once it has been written, in a batch
        this thread wrote or one another thread wrote while this one waited its turn.
        An error raised by ``write`` reaches the thread that was writing."""
        ticket = _Ticket(item)
        with self._lock:
            queue = self._queued.get(key)
            writing = queue is not None
            if queue is None:
                queue = self._queued[key] = deque()
            queue.append(ticket)
        if writing:
            ticket.woken.wait()
            if ticket.written:
                return
        # This thread's turn: its ticket is the oldest queued, so it is in the batch.
        self._write_batch(key)

    def waiting(self, key: str) -> int:
        """Items queued for ``key`` and not yet taken into a batch."""
        with self._lock:
            return len(self._queued.get(key, ()))

    def _write_batch(self, key: str) -> None:
        with self._lock:
            queue = self._queued[key]
            batch = [queue.popleft() for _ in range(min(self._limit, len(queue)))]
        try:
            self._write(key, [ticket.item for ticket in batch])
        finally:
            for ticket in batch:
                ticket.written = True
                ticket.woken.set()
            with self._lock:
                if queue:
                    queue[0].woken.set()  # the next writer
                else:
                    del self._queued[key]
