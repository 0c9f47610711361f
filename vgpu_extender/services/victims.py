"""Which pods to evict on one node, in HAMi's and kube-scheduler's order.

Pods are evicted lowest priority first, then those freeing the fewest devices, then
the most recently started (a pod not started yet counts as started now, as
kube-scheduler's ``GetPodStartTime`` has it), until the preemptor fits. Then every
evicted pod is given back, most important first, if the preemptor still fits
without its eviction: kube-scheduler's reprieve, which leaves a set none of whose
members can be spared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that may be evicted: its priority, the devices it holds on the node, and
    when it started (``None``: not yet)."""

    uid: str
    priority: int
    devices: int
    started: datetime | None = None

    @property
    def _start_s(self) -> float:
        return math.inf if self.started is None else self.started.timestamp()


def eviction_order(candidate: Candidate) -> tuple[int, int, float]:
    """Sort key: the first pod to evict sorts first."""
    return (candidate.priority, candidate.devices, -candidate._start_s)


def importance_order(candidate: Candidate) -> tuple[int, float]:
    """Sort key of kube-scheduler's victim lists (``MoreImportantPod``): the highest
    priority first, then the earliest started."""
    return (-candidate.priority, candidate._start_s)


def choose(
    candidates: Iterable[Candidate],
    *,
    fits: Callable[[], bool],
    evict: Callable[[Candidate], None],
    restore: Callable[[Candidate], None],
) -> list[Candidate] | None:
    """The pods to evict so that ``fits()`` holds, most important first; ``None`` when
    evicting them all does not help.

    ``evict`` and ``restore`` take a pod's devices away from and back into the
    scratch state that ``fits`` reads; on return the evicted ones are out of it.
    """
    evicted: list[Candidate] = []
    for candidate in sorted(candidates, key=eviction_order):
        evict(candidate)
        evicted.append(candidate)
        if fits():
            break
    else:
        return None
    needed: list[Candidate] = []
    for candidate in reversed(evicted):  # spare the most important first
        restore(candidate)
        if not fits():
            evict(candidate)
            needed.append(candidate)
    return sorted(needed, key=importance_order)
