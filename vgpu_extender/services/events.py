"""Why a pod fits nowhere, in kube-scheduler's words, as a pod Event.

kube-scheduler's own FailedScheduling event groups the extender's reasons by their
exact text, and ours carry numbers (``need 4000 MiB, best free 2048 MiB``), so one
reason shows up as many groups. The summary here counts nodes by reason alone:
``0/12 nodes: 7 insufficient gpumem, 5 gpu type mismatch``.

Counting runs in a worker thread, never inside filter: the verb only hands over the
outcome it already built. The same pod retried with the same summary gets one Event
per ``repeat_after_s``, not one per scheduling attempt.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.domain import Wording
from vgpu_extender.kube import KubeClient
from vgpu_extender.services.background import QueueWorker
from vgpu_extender.services.scheduling import FilterOutcome

#: Label for rejections that are not one of ours (decisive mode's "another node...").
OTHER = "other"
EVENT_REASON = "FilteringFailed"


def reason_of(message: str, wording: Wording) -> str:
    """The stable reason of a rejection message: its reason's text in ``wording`` (the
    one it was written in), else ``other``."""
    for text in wording.all_texts():
        if message.startswith(text):
            return text
    return OTHER


def rejection_counts(outcome: FilterOutcome) -> Counter[str]:
    """Rejected nodes per reason. Equal verdicts share one message string, so the
    messages are counted first (in C) and only the distinct ones are classified."""
    by_message: Counter[str] = Counter(outcome.failed.values())
    by_message.update(outcome.unresolvable.values())
    counts: Counter[str] = Counter()
    for message, n in by_message.items():
        counts[reason_of(message, outcome.wording)] += n
    return counts


def failure_summary(counts: Mapping[str, int], total: int) -> str:
    """``0/12 nodes: 7 insufficient gpumem, 5 gpu type mismatch``; most frequent first."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    parts = ", ".join(f"{n} {reason}" for reason, n in ranked if n)
    return f"0/{total} nodes: {parts}" if parts else f"0/{total} nodes"


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodRef | None:
        metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
        if not isinstance(metadata, Mapping):
            return None
        name, namespace, uid = (metadata.get(k) for k in ("name", "namespace", "uid"))
        if not isinstance(name, str) or not name:
            return None
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
        return cls(namespace, name, uid if isinstance(uid, str) else "")


@dataclass(frozen=True, slots=True)
class _Unschedulable:
    pod: PodRef | None
    total: int
    outcome: FilterOutcome


class UnschedulableReporter:
    """Turns filter outcomes with no feasible node into reason counts and pod Events.

    ``on_counts`` receives the per-reason counts of every such outcome (the metrics);
    Events go to ``kube`` when there is one. ``submit`` never blocks: when the queue is
    full the outcome is dropped and ``on_drop`` called.
    """

    def __init__(
        self,
        *,
        kube: KubeClient | None,
        on_counts: Callable[[Counter[str]], None] = lambda counts: None,
        on_drop: Callable[[], None] = lambda: None,
        repeat_after_s: float = 60.0,
        capacity: int = 1024,
        remembered: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._on_counts = on_counts
        self._repeat_after_s = repeat_after_s
        self._remembered = remembered
        self._monotonic = monotonic
        self._last: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._worker: QueueWorker[_Unschedulable] = QueueWorker(
            self._handle_item,
            name="vgpu-events",
            capacity=capacity,
            on_drop=on_drop,
        )

    # ----------------------------------------------------------------- the verb's side
    def submit(self, pod: Mapping[str, Any], total: int, outcome: FilterOutcome) -> None:
        self._worker.submit(_Unschedulable(PodRef.of(pod), total, outcome))

    # ----------------------------------------------------------------- the worker
    def start(self) -> None:
        self._worker.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._worker.stop(timeout_s)

    def _handle_item(self, item: _Unschedulable) -> None:
        self.handle(item.pod, item.total, item.outcome)

    def handle(self, pod: PodRef | None, total: int, outcome: FilterOutcome) -> str:
        """Count one outcome and record its Event; returns the summary."""
        counts = rejection_counts(outcome)
        self._on_counts(counts)
        summary = failure_summary(counts, total)
        if self._kube is not None and pod is not None and self._fresh(pod, summary):
            self._kube.create_event(
                namespace=pod.namespace,
                pod=pod.name,
                uid=pod.uid,
                reason=EVENT_REASON,
                message=summary,
                type="Warning",
            )
        return summary

    def _fresh(self, pod: PodRef, summary: str) -> bool:
        """Whether this summary is news for the pod (new text, or old enough to repeat)."""
        key = pod.uid or f"{pod.namespace}/{pod.name}"
        now = self._monotonic()
        last = self._last.get(key)
        if last is not None and last[0] == summary and now - last[1] < self._repeat_after_s:
            return False
        self._last[key] = (summary, now)
        self._last.move_to_end(key)
        while len(self._last) > self._remembered:
            self._last.popitem(last=False)
        return True
