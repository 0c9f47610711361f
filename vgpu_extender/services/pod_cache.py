"""Pods as seen at filter, kept by UID for a bounded time.

The bind body carries only the pod's name, namespace, UID and node, so the request
parsed at filter is kept here for bind to use. prioritize gets the very pod object
filter got moments before: with the same UID and ``resourceVersion`` (the API server
changes it on every change of the object) it is the same pod, and its request is
taken from here rather than parsed again. Bounded in size (least recently used
goes first) and in age, so a flood of filters for pods that are never bound cannot
grow memory without limit.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from vgpu_extender.domain import PodRequest


@dataclass(frozen=True, slots=True)
class CachedPod:
    request: PodRequest
    seen_at: float
    #: The pod's ``metadata.resourceVersion`` when parsed ("" if it had none).
    version: str = ""


class PodCache:
    """A thread-safe LRU map from pod UID to its parsed request, with a TTL."""

    def __init__(
        self,
        *,
        max_size: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {max_size!r}")
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s!r}")
        self._max_size = max_size
        self._ttl_s = ttl_s
        self._clock = clock
        self._items: OrderedDict[str, CachedPod] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, request: PodRequest, *, version: str = "") -> None:
        if not request.uid:
            return  # a pod without a UID can never be bound by UID
        now = self._clock()
        with self._lock:
            self._items[request.uid] = CachedPod(request, now, version)
            self._items.move_to_end(request.uid)
            while len(self._items) > self._max_size:
                self._items.popitem(last=False)

    def get(self, uid: str, *, version: str | None = None) -> PodRequest | None:
        """The pod's request; with ``version``, only if it was parsed from that
        ``resourceVersion`` of the pod (an empty one matches nothing)."""
        now = self._clock()
        with self._lock:
            item = self._items.get(uid)
            if item is None:
                return None
            if now - item.seen_at > self._ttl_s:
                del self._items[uid]
                return None
            if version is not None and (not version or item.version != version):
                return None
            return item.request

    def pop(self, uid: str) -> None:
        with self._lock:
            self._items.pop(uid, None)
