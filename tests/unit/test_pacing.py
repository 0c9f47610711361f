"""The pacer that cuts a background pass into short bursts."""

from __future__ import annotations

import pytest

from vgpu_extender.services.pacing import Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_it_pauses_once_a_burst_has_gone_by_and_not_before() -> None:
    clock = Clock()
    pacer = Pacer(burst_s=0.001, pause_s=0.002, check_every=4, clock=clock, sleep=clock.sleep)
    for _ in range(8):
        clock.now += 0.0001  # 8 items: 0.8 ms of work, under a burst
        pacer.tick()
    assert clock.slept == []
    for _ in range(4):
        clock.now += 0.0001  # past 1 ms at the next reading of the clock
        pacer.tick()
    assert clock.slept == [0.002]
    assert pacer.pauses == 1
    # The next burst is counted from the end of the pause.
    for _ in range(4):
        clock.now += 0.0001
        pacer.tick()
    assert pacer.pauses == 1


def test_the_clock_is_read_only_every_check_every_items() -> None:
    clock = Clock()
    pacer = Pacer(burst_s=0.001, pause_s=0.0, check_every=3, clock=clock, sleep=clock.sleep)
    clock.now = 1.0  # long past a burst
    pacer.tick()
    pacer.tick()
    assert pacer.pauses == 0
    pacer.tick()
    assert pacer.pauses == 1


@pytest.mark.parametrize(
    ("burst_s", "pause_s", "check_every"), [(0.0, 0.001, 1), (0.001, -1.0, 1), (0.001, 0.001, 0)]
)
def test_bad_settings_are_refused_by_name(burst_s: float, pause_s: float, check_every: int) -> None:
    with pytest.raises(ValueError, match="burst_s must be > 0, pause_s >= 0 and check_every >= 1"):
        Pacer(burst_s=burst_s, pause_s=pause_s, check_every=check_every)
