"""The victim search on one node, with worked examples of its order.

A toy node: the preemptor fits once ``need`` MiB are free; each candidate frees the
MiB given in ``FREES``. The search evicts in HAMi's and kube-scheduler's order
(lowest priority, then fewest devices freed, then most recently started) and then
gives back, most important first, whatever the preemptor does not need.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vgpu_extender.services.victims import (
    Candidate,
    choose,
    eviction_order,
    importance_order,
)

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
T1 = datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
T2 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _search(
    candidates: list[Candidate], frees: dict[str, int], need: int
) -> tuple[list[str] | None, list[str]]:
    """The chosen UIDs, and the pods in the order first evicted (the give-back pass
    evicts a needed pod again)."""
    free = 0
    log: list[str] = []

    def evict(c: Candidate) -> None:
        nonlocal free
        free += frees[c.uid]
        log.append(c.uid)

    def restore(c: Candidate) -> None:
        nonlocal free
        free -= frees[c.uid]

    chosen = choose(candidates, fits=lambda: free >= need, evict=evict, restore=restore)
    return (None if chosen is None else [c.uid for c in chosen]), list(dict.fromkeys(log))


def test_lowest_priority_goes_first() -> None:
    # Same devices, same start: priority 1 goes before 5 and 3, and is enough.
    pods = [Candidate("a", 5, 1, T0), Candidate("b", 1, 1, T0), Candidate("c", 3, 1, T0)]
    chosen, log = _search(pods, {"a": 10, "b": 10, "c": 10}, need=10)
    assert chosen == ["b"]
    assert log == ["b"]


def test_among_equal_priorities_the_pod_freeing_fewest_devices_goes_first() -> None:
    # "wide" holds 4 GPUs, "narrow" 1: both free enough; evicting "narrow" costs less.
    pods = [Candidate("wide", 0, 4, T2), Candidate("narrow", 0, 1, T0)]
    chosen, _ = _search(pods, {"wide": 40, "narrow": 10}, need=10)
    assert chosen == ["narrow"]


def test_among_equals_the_most_recently_started_goes_first() -> None:
    pods = [Candidate("old", 0, 1, T0), Candidate("new", 0, 1, T2), Candidate("mid", 0, 1, T1)]
    chosen, log = _search(pods, {"old": 10, "new": 10, "mid": 10}, need=10)
    assert chosen == ["new"]
    # Needing two, the next most recent follows; the oldest is spared.
    chosen, log = _search(pods, {"old": 10, "new": 10, "mid": 10}, need=20)
    assert chosen == ["mid", "new"]  # answered most important (earliest) first
    assert log == ["new", "mid"]


def test_a_pod_not_started_yet_counts_as_the_most_recent() -> None:
    pods = [Candidate("running", 0, 1, T2), Candidate("pending", 0, 1, None)]
    chosen, _ = _search(pods, {"running": 10, "pending": 10}, need=10)
    assert chosen == ["pending"]


def test_victims_the_preemptor_turns_out_not_to_need_are_given_back() -> None:
    # "small" (priority 0) goes first but frees too little; "big" (priority 1) is
    # then enough alone, so "small" is given back: one victim, not two.
    pods = [Candidate("small", 0, 1, T0), Candidate("big", 1, 1, T0)]
    chosen, log = _search(pods, {"small": 2, "big": 10}, need=10)
    assert log[:2] == ["small", "big"]
    assert chosen == ["big"]


def test_the_give_back_spares_the_most_important_first() -> None:
    # Evicted in order c (p0), b (p1), a (p2) before 20 MiB are free. Given back most
    # important first: a is spared (b and c free 20), then b is needed, then c.
    pods = [Candidate("a", 2, 1, T0), Candidate("b", 1, 1, T0), Candidate("c", 0, 1, T0)]
    chosen, _ = _search(pods, {"a": 10, "b": 10, "c": 10}, need=20)
    assert chosen == ["b", "c"]


def test_none_when_evicting_everything_is_not_enough() -> None:
    pods = [Candidate("a", 0, 1, T0), Candidate("b", 0, 1, T1)]
    assert _search(pods, {"a": 10, "b": 10}, need=30)[0] is None
    assert _search([], {}, need=1)[0] is None


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (Candidate("x", 0, 9, T0), Candidate("y", 1, 1, T2)),  # priority before devices
        (Candidate("x", 0, 1, T0), Candidate("y", 0, 2, T2)),  # devices before start time
        (Candidate("x", 0, 1, T2), Candidate("y", 0, 1, T0)),  # most recent first
    ],
    ids=["priority", "devices", "start"],
)
def test_eviction_order_keys(first: Candidate, second: Candidate) -> None:
    assert eviction_order(first) < eviction_order(second)


def test_importance_order_is_kube_schedulers() -> None:
    pods = [Candidate("p0", 0, 1, T0), Candidate("p9-late", 9, 1, T2), Candidate("p9", 9, 1, T0)]
    assert [c.uid for c in sorted(pods, key=importance_order)] == ["p9", "p9-late", "p0"]
