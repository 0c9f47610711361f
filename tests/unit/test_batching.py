"""Batches: one writer per key at a time, taking what queued meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from vgpu_extender.services.batching import Batches

WAIT_S = 10.0


class Recorder:
    """A ``write`` that records its batches and can hold the first one until released."""

    def __init__(self, *, hold_first: bool = False, fail_on: str = "") -> None:
        self.batches: list[tuple[str, list[str]]] = []
        self.writing = threading.Event()
        self.release = threading.Event()
        self._hold = hold_first
        self._fail_on = fail_on
        self._lock = threading.Lock()

    def __call__(self, key: str, items: list[str]) -> None:
        with self._lock:
            self.batches.append((key, list(items)))
            hold, self._hold = self._hold, False
        if hold:
            self.writing.set()
            assert self.release.wait(WAIT_S)
        if self._fail_on in items:
            raise RuntimeError(f"write of {items} failed")


def _submit_in_thread(
    batches: Batches[str], key: str, item: str, errors: dict[str, BaseException]
) -> threading.Thread:
    def run() -> None:
        try:
            batches.submit(key, item)
        except BaseException as exc:  # recorded for the test to assert
            errors[item] = exc

    thread = threading.Thread(target=run, name=f"submit-{item}")
    thread.start()
    return thread


def _wait_until(condition: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(1000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


def test_a_lone_item_is_written_at_once_alone() -> None:
    write = Recorder()
    batches = Batches(write)
    batches.submit("node-a", "p1")
    batches.submit("node-a", "p2")
    assert write.batches == [("node-a", ["p1"]), ("node-a", ["p2"])]


def test_items_queued_during_a_write_go_together_in_order() -> None:
    write = Recorder(hold_first=True)
    batches = Batches(write)
    errors: dict[str, BaseException] = {}
    first = _submit_in_thread(batches, "node-a", "p1", errors)
    assert write.writing.wait(WAIT_S)
    waiting = []
    for n, item in enumerate(("p2", "p3", "p4"), start=1):
        waiting.append(_submit_in_thread(batches, "node-a", item, errors))
        _wait_until(lambda n=n: batches.waiting("node-a") == n)
    assert all(thread.is_alive() for thread in waiting)  # none returns before its write
    write.release.set()
    for thread in (first, *waiting):
        thread.join(WAIT_S)
        assert not thread.is_alive()
    assert errors == {}
    assert write.batches == [("node-a", ["p1"]), ("node-a", ["p2", "p3", "p4"])]
    assert batches.waiting("node-a") == 0


def test_the_limit_splits_what_queued_into_several_batches() -> None:
    write = Recorder(hold_first=True)
    batches = Batches(write, limit=2)
    errors: dict[str, BaseException] = {}
    threads = [_submit_in_thread(batches, "node-a", "p0", errors)]
    assert write.writing.wait(WAIT_S)
    for n in range(1, 6):
        threads.append(_submit_in_thread(batches, "node-a", f"p{n}", errors))
        _wait_until(lambda n=n: batches.waiting("node-a") == n)
    write.release.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert errors == {}
    assert [items for _key, items in write.batches] == [
        ["p0"],
        ["p1", "p2"],
        ["p3", "p4"],
        ["p5"],
    ]


def test_other_keys_do_not_wait() -> None:
    write = Recorder(hold_first=True)
    batches = Batches(write)
    errors: dict[str, BaseException] = {}
    held = _submit_in_thread(batches, "node-a", "p1", errors)
    assert write.writing.wait(WAIT_S)
    batches.submit("node-b", "p2")  # returns while node-a's write is held
    assert write.batches[-1] == ("node-b", ["p2"])
    write.release.set()
    held.join(WAIT_S)
    assert errors == {}


def test_a_failed_write_reaches_its_writer_and_the_next_batch_goes_on() -> None:
    write = Recorder(hold_first=True, fail_on="p2")
    batches = Batches(write)
    errors: dict[str, BaseException] = {}
    first = _submit_in_thread(batches, "node-a", "p1", errors)
    assert write.writing.wait(WAIT_S)
    second = _submit_in_thread(batches, "node-a", "p2", errors)
    _wait_until(lambda: batches.waiting("node-a") == 1)
    third = _submit_in_thread(batches, "node-a", "p3", errors)
    _wait_until(lambda: batches.waiting("node-a") == 2)
    write.release.set()
    for thread in (first, second, third):
        thread.join(WAIT_S)
        assert not thread.is_alive()
    # p2's thread wrote the batch [p2, p3]: it gets the error; p3's thread returns.
    assert list(errors) == ["p2"]
    assert "write of ['p2', 'p3'] failed" in str(errors["p2"])
    batches.submit("node-a", "p4")
    assert write.batches[-1] == ("node-a", ["p4"])


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Batches(Recorder(), limit=0)
