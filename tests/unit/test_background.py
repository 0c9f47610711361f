"""The bounded worker queue, and the bind Event recorder built on it."""

from __future__ import annotations

import pytest

from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.background import BatchWorker, QueueWorker
from vgpu_extender.services.event_recorder import EventRecorder


def test_a_full_queue_drops_and_counts_and_stop_handles_the_rest_in_order() -> None:
    handled: list[int] = []
    drops: list[None] = []
    worker = QueueWorker(handled.append, name="t", capacity=2, on_drop=lambda: drops.append(None))
    for item in (1, 2, 3):
        worker.submit(item)
    assert len(drops) == 1
    worker.start()
    worker.stop()
    assert handled == [1, 2]


def test_a_failing_item_does_not_end_the_worker(caplog: pytest.LogCaptureFixture) -> None:
    handled: list[int] = []

    def handle(item: int) -> None:
        if item == 1:
            raise RuntimeError("boom")
        handled.append(item)

    worker = QueueWorker(handle, name="t")
    worker.start()
    for item in (1, 2):
        worker.submit(item)
    worker.stop()
    assert handled == [2]
    assert "t: handling an item failed" in caplog.text


def test_the_recorder_posts_every_queued_event_by_the_time_it_stops() -> None:
    kube = FakeKubeClient()
    recorder = EventRecorder(kube)
    recorder.start()
    for n in range(50):
        recorder.record(
            namespace="ns", pod=f"p{n}", uid=f"u{n}", reason="BindingSucceed", message="ok"
        )
    recorder.record(
        namespace="ns", pod="bad", uid="u", reason="BindingFailed", message="no", type="Warning"
    )
    recorder.stop()
    assert [e["involvedObject"]["name"] for e in kube.events] == [f"p{n}" for n in range(50)] + [
        "bad"
    ]
    assert (kube.events[-1]["reason"], kube.events[-1]["type"]) == ("BindingFailed", "Warning")


def test_the_recorder_counts_what_a_full_queue_drops() -> None:
    kube = FakeKubeClient()
    drops: list[None] = []
    recorder = EventRecorder(kube, capacity=1, on_drop=lambda: drops.append(None))
    for pod in ("a", "b"):
        recorder.record(namespace="ns", pod=pod, uid="", reason="BindingSucceed", message="ok")
    assert len(drops) == 1
    recorder.start()
    recorder.stop()
    assert [e["involvedObject"]["name"] for e in kube.events] == ["a"]


def test_a_batch_worker_hands_over_what_is_queued_at_once_up_to_its_batch() -> None:
    batches: list[list[int]] = []
    worker = BatchWorker(batches.append, name="t", batch=3)
    for item in range(7):  # queued before the worker starts: all waiting together
        worker.submit(item)
    worker.start()
    worker.stop()
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_failing_batch_does_not_end_the_batch_worker(caplog: pytest.LogCaptureFixture) -> None:
    batches: list[list[int]] = []

    def handle(items: list[int]) -> None:
        if 0 in items:
            raise RuntimeError("boom")
        batches.append(items)

    worker = BatchWorker(handle, name="t", batch=2)
    for item in range(4):
        worker.submit(item)
    worker.start()
    worker.stop()
    assert batches == [[2, 3]]
    assert "t: handling an item failed" in caplog.text
