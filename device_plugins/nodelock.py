"""HAMi's node lock, as the device plugin sees it.

The scheduler's bind writes ``hami.io/mutex.lock = <RFC3339>,<namespace>,<pod>`` on
the node before binding; kubelet's Allocate does not say which pod it is for, so
the lock names it. The plugin releases the lock once the pod's devices are all
handed out, or when allocation fails. The legacy value is the timestamp alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from device_plugins.kube import KubeAccessError, KubeGateway

log = logging.getLogger(__name__)

LOCK_ANNOTATION = "hami.io/mutex.lock"
RELEASE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class NodeLock:
    stamp: str
    namespace: str = ""
    pod: str = ""

    @property
    def names_pod(self) -> bool:
        return bool(self.namespace and self.pod)


def parse_lock(value: str | None) -> NodeLock | None:
    """The lock in an annotation value; None when there is none."""
    if not value:
        return None
    parts = value.split(",")
    if len(parts) >= 3:
        return NodeLock(parts[0], parts[1], ",".join(parts[2:]))
    return NodeLock(value)


def current_lock(gateway: KubeGateway, node: str) -> NodeLock | None:
    obj = gateway.get_node(node)
    if obj is None:
        raise KubeAccessError(f"node {node} not found", status=404)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(LOCK_ANNOTATION)
    return parse_lock(value if isinstance(value, str) else None)


def release_lock(gateway: KubeGateway, node: str, matches: Callable[[NodeLock], bool]) -> bool:
    """Remove the node's lock if ``matches(lock)``; True when released.

    The patch carries the node's resourceVersion, so a lock taken by another bind
    between our read and our write is never removed by mistake.
    """
    for _ in range(RELEASE_ATTEMPTS):
        obj = gateway.get_node(node)
        if obj is None:
            return False
        metadata = obj.get("metadata") or {}
        lock = parse_lock((metadata.get("annotations") or {}).get(LOCK_ANNOTATION))
        if lock is None or not matches(lock):
            return False
        try:
            gateway.patch_node_annotations(
                node, {LOCK_ANNOTATION: None}, resource_version=metadata.get("resourceVersion")
            )
        except KubeAccessError as exc:
            if exc.status == 409:
                continue
            raise
        return True
    log.warning("could not release the node lock of %s after %d conflicts", node, RELEASE_ATTEMPTS)
    return False


def held_by(namespace: str, pod: str) -> Callable[[NodeLock], bool]:
    """Matches a lock naming this pod, or a legacy lock that names nobody."""
    return lambda lock: not lock.names_pod or (lock.namespace, lock.pod) == (namespace, pod)
