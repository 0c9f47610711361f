"""The pacer that cuts a background pass into short bursts."""

from __future__ import annotations

import pytest

from vgpu_extender.services.pacing import Foreground, Pacer


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
    with pytest.raises(ValueError, match="burst_s must be > 0, pause_s >= 0, check_every >= 1"):
        Pacer(burst_s=burst_s, pause_s=pause_s, check_every=check_every)


def test_bad_minimum_bursts_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"min_burst_s within \[0, burst_s\]"):
        Pacer(burst_s=0.001, min_burst_s=0.002)


def _paced(clock: Clock, foreground: Foreground) -> Pacer:
    return Pacer(
        burst_s=0.001,
        pause_s=0.004,
        check_every=1,
        foreground=foreground,
        min_burst_s=0.0002,
        clock=clock,
        sleep=clock.sleep,
    )


def test_a_verb_under_way_cuts_the_burst_short_once_the_minimum_is_done() -> None:
    clock = Clock()
    foreground = Foreground(linger_s=0.002, clock=clock)
    pacer = _paced(clock, foreground)
    foreground.enter()
    clock.now += 0.0001  # under the minimum: the pass moves on even so
    pacer.tick()
    assert pacer.pauses == 0
    clock.now += 0.0001  # 0.2 ms: the minimum done, a verb under way
    pacer.tick()
    assert clock.slept == [0.004]


def test_a_verb_just_done_still_cuts_the_burst_short_then_no_longer() -> None:
    clock = Clock()
    foreground = Foreground(linger_s=0.002, clock=clock)
    pacer = _paced(clock, foreground)
    foreground.enter()
    foreground.leave()  # at 0.0
    clock.now += 0.0003  # 0.3 ms later: within the linger
    pacer.tick()
    assert pacer.pauses == 1  # now 4.3 ms: the linger is over
    clock.now += 0.0003
    pacer.tick()
    assert pacer.pauses == 1  # a burst runs whole again
    clock.now += 0.0008
    pacer.tick()
    assert pacer.pauses == 2


def test_without_a_foreground_only_whole_bursts_pause() -> None:
    clock = Clock()
    pacer = Pacer(burst_s=0.001, pause_s=0.004, check_every=1, clock=clock, sleep=clock.sleep)
    clock.now += 0.0009
    pacer.tick()
    assert pacer.pauses == 0


def test_verbs_in_flight_are_counted_in_and_out() -> None:
    clock = Clock()
    foreground = Foreground(linger_s=0.002, clock=clock)
    assert not foreground.busy(clock.now)
    foreground.enter()
    foreground.enter()
    foreground.leave()
    clock.now = 10.0
    assert foreground.busy(clock.now)  # one still under way
    foreground.leave()
    assert foreground.busy(10.0019)
    assert not foreground.busy(10.002)
