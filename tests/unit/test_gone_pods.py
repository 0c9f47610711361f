"""GonePods: the UIDs the watch saw go, kept for a while and up to a count."""

from __future__ import annotations

import pytest

from vgpu_extender.services.gone_pods import GonePods


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_recorded_uid_is_gone_and_others_are_not() -> None:
    gone = GonePods(clock=Clock())
    gone.record("uid-a")
    assert "uid-a" in gone
    assert "uid-b" not in gone


def test_a_uid_is_forgotten_after_keep_s() -> None:
    clock = Clock()
    gone = GonePods(keep_s=60.0, clock=clock)
    gone.record("old")
    clock.now += 30.0
    gone.record("young")
    clock.now += 30.5  # "old" is 60.5 s old, "young" 30.5 s
    assert "old" not in gone
    assert "young" in gone
    assert len(gone) == 1


def test_past_the_most_the_oldest_go_first() -> None:
    clock = Clock()
    gone = GonePods(most=3, clock=clock)
    for uid in ("a", "b", "c", "d"):
        clock.now += 1.0
        gone.record(uid)
    assert [uid for uid in "abcd" if uid in gone] == ["b", "c", "d"]


def test_recording_again_makes_a_uid_young_again() -> None:
    clock = Clock()
    gone = GonePods(keep_s=10.0, most=2, clock=clock)
    gone.record("a")
    clock.now += 8.0
    gone.record("b")
    gone.record("a")  # a DELETED after a terminal MODIFIED, say
    clock.now += 5.0
    gone.record("c")  # past the most: "b" is now the oldest
    assert [uid for uid in "abc" if uid in gone] == ["a", "c"]


@pytest.mark.parametrize(("keep_s", "most"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_bad_limits_are_refused(keep_s: float, most: int) -> None:
    with pytest.raises(ValueError, match="keep_s must be"):
        GonePods(keep_s=keep_s, most=most)
