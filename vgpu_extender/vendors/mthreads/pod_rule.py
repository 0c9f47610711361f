"""Moore Threads' pod-level rule (HAMi's ``customFilterRule``): "only one mthreads
device can be shared in a pod". When a container is placed, a GPU is refused if any
earlier container of the pod holds a GPU other than it; the GPUs of one container
need not be the same one. The engine has no per-pod rule yet; this is the pure check
for the seam that will call it."""

from __future__ import annotations

from collections.abc import Iterable


def allows(earlier: Iterable[str], candidate: str) -> bool:
    """Whether ``candidate`` may be given, the pod's earlier containers holding the
    GPUs ``earlier``."""
    return all(uuid == candidate for uuid in earlier)
