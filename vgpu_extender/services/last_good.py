"""A value read from the store, kept for when the store cannot be read.

``/metrics`` counts the reservations still waiting for their Binding, which only the
store holds; while the store is out of reach a scrape still answers, from the last
rows read. While readiness says the store is unavailable the store is not even tried,
so a scrape never waits on a dead server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from vgpu_extender.services.store_health import StoreHealth
from vgpu_extender.store.errors import FAILURES

T = TypeVar("T")


class LastGood(Generic[T]):
    """``read()`` while the store answers; what it last returned (``initial`` before
    the first success) while it does not."""

    def __init__(self, read: Callable[[], T], initial: T, *, health: StoreHealth, what: str):
        self._read = read
        self._value = initial
        self._health = health
        self._what = what

    def __call__(self) -> T:
        if not self._health.available:
            return self._value
        try:
            value = self._read()
        except FAILURES as exc:
            self._health.report(exc, where=f"{self._what} (last rows shown)")
            return self._value
        self._value = value
        return value
