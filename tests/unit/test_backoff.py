"""The retry schedules: exponential ceilings, full jitter, reset after a healthy
period, and the database wait at start-up; all on injected random and clocks."""

from __future__ import annotations

import logging
import random

import pytest

from tests.support.server import free_port
from vgpu_extender.backoff import Backoff, HealthyReset
from vgpu_extender.store.database import make_engine, wait_for_database
from vgpu_extender.store.errors import StoreUnavailable


def test_ceilings_double_from_the_first_step_to_the_cap() -> None:
    backoff = Backoff(initial_s=0.5, cap_s=30.0, rng=random.Random(1))
    ceilings = []
    for _ in range(10):
        ceilings.append(backoff.ceiling())
        backoff.next_delay()
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]


def test_each_delay_is_drawn_below_its_ceiling_and_reproducible_by_seed() -> None:
    first = Backoff(rng=random.Random(7))
    second = Backoff(rng=random.Random(7))
    delays = []
    for _ in range(20):
        ceiling = first.ceiling()
        delay = first.next_delay()
        assert 0.0 <= delay <= ceiling
        delays.append(delay)
    assert delays == [second.next_delay() for _ in range(20)]
    # Jittered: not the same delay twice at the cap.
    assert len(set(delays[-5:])) == 5


def test_a_long_outage_stays_at_the_cap() -> None:
    backoff = Backoff(initial_s=0.5, cap_s=30.0, rng=random.Random(0))
    for _ in range(5000):
        assert backoff.next_delay() <= 30.0
    assert backoff.ceiling() == 30.0


def test_reset_starts_again_from_the_first_step() -> None:
    backoff = Backoff(initial_s=0.5, rng=random.Random(0))
    for _ in range(6):
        backoff.next_delay()
    backoff.reset()
    assert backoff.attempts == 0 and backoff.ceiling() == 0.5


@pytest.mark.parametrize(("initial_s", "cap_s", "factor"), [(0, 1, 2), (2, 1, 2), (1, 2, 0.5)])
def test_a_schedule_that_cannot_back_off_is_refused(
    initial_s: float, cap_s: float, factor: float
) -> None:
    with pytest.raises(ValueError, match="initial_s"):
        Backoff(initial_s=initial_s, cap_s=cap_s, factor=factor)


def test_a_connection_up_for_the_healthy_period_resets_the_schedule() -> None:
    now = [0.0]
    retry = HealthyReset(
        Backoff(initial_s=1.0, cap_s=60.0, rng=random.Random(3)),
        healthy_s=60.0,
        clock=lambda: now[0],
    )
    for _ in range(4):  # failing at once: the ceiling keeps doubling
        retry.connected()
        retry.failed()
    assert retry.backoff.ceiling() == 16.0
    retry.connected()
    now[0] += 59.0
    retry.failed()  # up 59 s: not healthy yet
    assert retry.backoff.ceiling() == 32.0
    retry.connected()
    now[0] += 61.0
    delay = retry.failed()  # up 61 s: starts again
    assert delay <= 1.0 and retry.backoff.attempts == 1


def test_failures_before_any_connection_keep_backing_off() -> None:
    retry = HealthyReset(Backoff(initial_s=1.0, cap_s=8.0, rng=random.Random(0)))
    for _ in range(5):
        retry.failed()
    assert retry.backoff.ceiling() == 8.0


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_database_wait_gives_up_at_its_deadline_logging_each_error_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = make_engine(f"postgresql+psycopg://vgpu:pw@127.0.0.1:{free_port()}/vgpu")
    fake = FakeTime()
    backoff = Backoff(initial_s=0.25, cap_s=5.0, rng=random.Random(5))
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(StoreUnavailable) as caught:
            wait_for_database(
                engine, timeout_s=20.0, backoff=backoff, clock=fake.clock, sleep=fake.sleep
            )
    finally:
        engine.dispose()
    tries = len(fake.sleeps) + 1
    assert f"after {tries} tries in 20 s" in str(caught.value)
    assert fake.now == pytest.approx(120.0)  # the last sleep ends at the deadline
    assert tries > 5  # backed off, not one try per 5 s cap
    lines = [r for r in caplog.records if "store not reachable yet" in r.getMessage()]
    assert len(lines) == 1
    assert "pw@" not in caplog.text


def test_a_sqlite_file_that_cannot_be_opened_is_tried_once(tmp_path: object) -> None:
    engine = make_engine("sqlite:////nonexistent-dir/for-sure/x.db")
    fake = FakeTime()
    try:
        with pytest.raises(StoreUnavailable, match="after 1 tries"):
            wait_for_database(engine, timeout_s=30.0, clock=fake.clock, sleep=fake.sleep)
    finally:
        engine.dispose()
    assert fake.sleeps == []


def test_a_reachable_database_is_one_try(tmp_path: object) -> None:
    engine = make_engine("sqlite://")
    try:
        assert wait_for_database(engine, timeout_s=0.0) == 1
    finally:
        engine.dispose()
