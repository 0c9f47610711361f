"""The Kubernetes seam: the ``KubeClient`` protocol, its errors, HAMi's node lock.

The real implementation lives in :mod:`vgpu_extender.kube.real` (it imports the
``kubernetes`` package, so it is not imported here); the in-memory fake in
:mod:`vgpu_extender.kube.fake`.
"""

from vgpu_extender.kube.client import (
    EventType,
    KubeClient,
    Listing,
    Pace,
    WatchEvent,
    WatchEventType,
)
from vgpu_extender.kube.errors import (
    AlreadyBound,
    Conflict,
    KubeError,
    MalformedObject,
    NodeLockContention,
    NotFound,
    OutcomeUnknown,
    UidMismatch,
    WatchExpired,
)
from vgpu_extender.kube.node_lock import LOCK_ANNOTATION, Backoff, LockValue, NodeLock
from vgpu_extender.kube.objects import KubeObject

__all__ = [
    "LOCK_ANNOTATION",
    "AlreadyBound",
    "Backoff",
    "Conflict",
    "EventType",
    "KubeClient",
    "KubeError",
    "KubeObject",
    "Listing",
    "LockValue",
    "MalformedObject",
    "NodeLock",
    "NodeLockContention",
    "NotFound",
    "OutcomeUnknown",
    "Pace",
    "UidMismatch",
    "WatchEvent",
    "WatchEventType",
    "WatchExpired",
]
