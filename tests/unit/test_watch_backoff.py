"""The API server watches retry with exponential backoff and jitter, and say so once
per kind of failure instead of once per try."""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu_extender.backoff import Backoff, HealthyReset
from vgpu_extender.services import sync
from vgpu_extender.services.sync import SyncService


class CountingStop:
    """The service's stop event: never waits, records each pause, stops after ``n``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return len(self.waits) >= self.n

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return self.is_set()


def _loop(stop: CountingStop, relist: Any, watch: Any = None) -> None:
    service = SyncService.__new__(SyncService)  # only the loop's own state is used
    service._stop = stop  # type: ignore[assignment]

    def no_events(version: str, timeout_s: float) -> Iterator[tuple[str, Any]]:
        return iter(())

    service._watch_loop(watch or no_events, relist, lambda kind, obj: None, None)


def test_an_api_server_that_is_down_is_retried_ever_later_up_to_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reason = f"connection refused {uuid.uuid4()}"

    def relist() -> str:
        raise ConnectionError(reason)

    stop = CountingStop(12)
    with caplog.at_level(logging.WARNING, logger=sync.__name__):
        _loop(stop, relist)
    for attempt, delay in enumerate(stop.waits):
        assert 0 <= delay <= min(sync.RETRY_CAP_S, sync.RETRY_INITIAL_S * 2**attempt)
    # Jittered and growing: the later pauses are not all as short as the first step.
    assert max(stop.waits[6:]) > sync.RETRY_INITIAL_S * 2
    lines = [r for r in caplog.records if reason in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]


def test_a_watch_that_stays_up_starts_the_backoff_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    schedule = HealthyReset(
        Backoff(initial_s=sync.RETRY_INITIAL_S, cap_s=sync.RETRY_CAP_S, rng=random.Random(2)),
        healthy_s=sync.WATCH_HEALTHY_S,
        clock=lambda: now[0],
    )
    monkeypatch.setattr(sync, "watch_backoff", lambda: schedule)
    calls = [0]

    def relist() -> str:
        return "1"

    def watch(version: str, timeout_s: float) -> Iterator[tuple[str, Any]]:
        calls[0] += 1
        if 8 <= calls[0] <= 10:
            # Up, and renewed: each watch ends by its own timeout, none stays up a minute.
            now[0] += sync.WATCH_TIMEOUT_S
            return iter(())
        raise ConnectionError(f"watch broke {uuid.uuid4()}")

    stop = CountingStop(9)
    _loop(stop, relist, watch)
    # After seven quick failures the ceiling is 0.5 * 2**7; the eighth, after three
    # renewed watches (healthy 90 s in all, longer than WATCH_HEALTHY_S), starts over
    # from the first step.
    assert 3 * sync.WATCH_TIMEOUT_S > sync.WATCH_HEALTHY_S > sync.WATCH_TIMEOUT_S
    assert stop.waits[7] <= sync.RETRY_INITIAL_S
