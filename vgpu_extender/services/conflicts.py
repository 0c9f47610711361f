"""Allocation conflicts: running pods whose devices the store cannot give them.

An import (a bound pod carrying HAMi's annotations that the store does not know) that
would over-commit a device is refused by the store (``store.ImportConflict``): the pod
runs there, but recording it would count the device beyond what it has. Nothing is
written; the conflict is kept here instead, and while it is open its devices take no
new pod: the index refuses them as it refuses cordoned ones, with the reason
``conflicted devices``.

The registry lives in memory: a conflict is a fact about pods, and every reconcile pass
re-derives the open ones from the pod list (a restart loses nothing the first pass does
not find again). A conflict is resolved when its pod goes (deleted or finished), when a
later import of it fits (the pods holding the devices went), or when a reconcile pass no
longer finds it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from vgpu_extender.kube import KubeObject
from vgpu_extender.services.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class PodRef:
    uid: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """One running pod that could not be recorded, and the pods in its way."""

    pod: PodRef
    node: str
    #: Devices it does not fit on beside what the store holds.
    devices: tuple[str, ...]
    #: The pods holding those devices (empty when the pod alone exceeds a device).
    held_by: tuple[PodRef, ...]
    #: The ``Reason`` value of the first misfit, and the store's full message.
    reason: str
    message: str
    #: When it was first found, and last found again.
    since: datetime
    seen: datetime


class ConflictRegistry:
    """The open conflicts, and the devices they keep from new pods."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = cluster
        # Held while the index is told, so two changes never apply out of order.
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Conflict, KubeObject]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def open(self) -> list[Conflict]:
        """Every open conflict, by node and pod."""
        with self._lock:
            found = [conflict for conflict, _pod in self._open.values()]
        return sorted(found, key=lambda c: (c.node, c.pod.namespace, c.pod.name, c.pod.uid))

    def record(self, conflict: Conflict, pod: KubeObject) -> bool:
        """Open a conflict, or renew it (first ``since`` kept). True when it is new."""
        with self._lock:
            previous = self._open.get(conflict.pod.uid)
            if previous is not None:
                conflict = replace(conflict, since=previous[0].since)
            self._open[conflict.pod.uid] = (conflict, pod)
            nodes = {conflict.node} | ({previous[0].node} if previous is not None else set())
            self._refuse(nodes)
        return previous is None

    def resolve(self, pod_uid: str) -> Conflict | None:
        """Close the pod's conflict; returns it, or None when it had none."""
        with self._lock:
            entry = self._open.pop(pod_uid, None)
            if entry is None:
                return None
            self._refuse({entry[0].node})
            return entry[0]

    def waiting_on(self, pod_uid: str) -> list[KubeObject]:
        """The conflicting pods whose devices ``pod_uid`` held: their import may fit now."""
        with self._lock:
            return [
                pod
                for conflict, pod in self._open.values()
                if any(ref.uid == pod_uid for ref in conflict.held_by)
            ]

    def retain_seen_since(self, moment: datetime) -> list[Conflict]:
        """Close the conflicts not found again since ``moment`` (a reconcile pass's
        listing); returns them. Also tells the index again, in case it was rebuilt."""
        with self._lock:
            gone = [c for c, _pod in self._open.values() if c.seen < moment]
            for conflict in gone:
                del self._open[conflict.pod.uid]
            self._refuse({c.node for c, _pod in self._open.values()} | {c.node for c in gone})
        return gone

    def _refuse(self, nodes: Iterable[str]) -> None:
        """Give the index the devices each of ``nodes`` must keep from new pods."""
        refused: dict[str, set[str]] = {node: set() for node in nodes}
        for conflict, _pod in self._open.values():
            if conflict.node in refused:
                refused[conflict.node].update(conflict.devices)
        with self._cluster.lock:
            index = self._cluster.index
            for node, devices in refused.items():
                # Recorded for a node the index does not hold now, too: it gets them
                # when it is added (again).
                index.set_conflicted(node, devices)
