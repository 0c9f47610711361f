"""The node locks a bind takes, as HAMi's ``lockAllDevices`` takes them.

Each vendor the pod's app containers ask for (init containers are not looked at, as in
HAMi's ``LockNode``) locks the node by its own rule, in sorted CommonWord order:

- most take HAMi's shared ``hami.io/mutex.lock`` (``<RFC3339>,<ns>,<pod>``), taken
  once however many of the pod's vendors share it (HAMi's second vendor finds the pod's
  own lock and counts it as taken);
- Cambricon takes its own ``cambricon.com/dsmlu.lock`` (a bare RFC3339 time, refused
  while under 2 minutes old or unreadable, taken over once older);
- some take none (MetaX whole GPUs, Enflame, Kunlunxin whole cards, Moore Threads, AWS
  Neuron): a pod asking only for them locks nothing.

When one lock is refused, those taken before it are released (HAMi's rollback), and the
bind fails with the refusal. A bind that fails later releases them all, unless the
Binding's outcome is unknown (its answer lost and the pod unreadable): it may have
landed, and the lock is what keeps a second pod from allocating on the node before the
first. On success none is released here: each vendor's device plugin removes its lock once kubelet's
``Allocate`` for the pod is done (HAMi's plugins the shared one, Cambricon's plugin in
``dynamic-smlu`` mode its own), or the lock expires (5 minutes, 2 for Cambricon's).
Unlike HAMi, which calls every vendor's ``ReleaseNodeLock`` on a failed bind, a bind
releases only the locks it took: a lock another pod's bind holds stays.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu_extender.domain import PodRequest
from vgpu_extender.kube import LOCK_ANNOTATION, KubeError, NodeLock
from vgpu_extender.kube.node_lock import TimeLock
from vgpu_extender.vendors import Vendor, VendorSet
from vgpu_extender.vendors.cambricon import lock as cambricon_lock
from vgpu_extender.vendors.hami_vendor import HamiVendor

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HeldLocks:
    """The locks one bind took on ``node``, in the order taken: each annotation with
    the value written (empty for the shared lock, released by owner instead)."""

    node: str = ""
    namespace: str = ""
    pod: str = ""
    taken: tuple[tuple[str, str], ...] = ()


NO_LOCKS = HeldLocks()


def vendor_lock(vendor: Vendor) -> str | None:
    """The node annotation ``vendor`` locks at bind; None: it takes no lock. A vendor on
    the shared HAMi base names it (``VendorNames.node_lock``); any other (NVIDIA,
    Ascend) takes HAMi's shared lock."""
    if isinstance(vendor, HamiVendor):
        return vendor.names.node_lock
    return LOCK_ANNOTATION


def lock_order(vendors: VendorSet, request: PodRequest) -> tuple[str, ...]:
    """The node annotations a bind of ``request`` locks, in HAMi's order: the vendors an
    app container asks for, by sorted CommonWord, each one's lock, each lock once."""
    asked = {
        ask.vendor or vendors.primary.name
        for container in request.containers
        if not container.init
        for ask in container.asks
        if ask.count > 0
    }
    order: dict[str, None] = {}
    for word in sorted(asked):
        vendor = vendors.get(word)
        key = vendor_lock(vendor) if vendor is not None else None
        if key is not None:
            order.setdefault(key, None)
    return tuple(order)


class BindLocks:
    """Takes and releases the node locks of a bind's pod through HAMi's shared lock
    (``shared``) and, for vendors with a lock of their own, a ``TimeLock`` each."""

    def __init__(self, shared: NodeLock, vendors: VendorSet) -> None:
        self._shared = shared
        self._vendors = vendors
        self._own: dict[str, TimeLock] = {}
        for vendor in vendors.members:
            key = vendor_lock(vendor)
            if key is None or key == LOCK_ANNOTATION or key in self._own:
                continue
            if key != cambricon_lock.LOCK_ANNOTATION:
                raise ValueError(
                    f"vendor {vendor.name} locks node annotation {key!r} at bind, "
                    "which has no lock rule here"
                )
            self._own[key] = shared.time_lock(
                key,
                expires_after=cambricon_lock.LOCK_EXPIRES_AFTER,
                stamp=cambricon_lock.lock_value,
                held=cambricon_lock.lock_held,
            )

    @property
    def own_locks(self) -> Mapping[str, TimeLock]:
        """The vendors' own locks, by annotation."""
        return self._own

    def acquire(self, node: str, namespace: str, pod: str, request: PodRequest) -> HeldLocks:
        """Take every lock ``request`` needs on ``node``; raises the first refusal
        (``NodeLockContention``, or another ``KubeError``) after releasing those taken."""
        held = HeldLocks(node, namespace, pod)
        for key in lock_order(self._vendors, request):
            try:
                if key == LOCK_ANNOTATION:
                    self._shared.acquire(node, namespace, pod)
                    value = ""
                else:
                    value = self._own[key].acquire(node)
            except BaseException:
                self.release(held)
                raise
            held = HeldLocks(node, namespace, pod, (*held.taken, (key, value)))
        return held

    def release(self, held: HeldLocks) -> None:
        """Release what ``held`` took, the last taken first; a lock that cannot be
        released is logged (it expires)."""
        for key, value in reversed(held.taken):
            try:
                if key == LOCK_ANNOTATION:
                    self._shared.release(held.node, held.namespace, held.pod)
                else:
                    self._own[key].release(held.node, value)
            except KubeError as exc:
                logger.warning(
                    "bind %s/%s: node %s: %s not released: %s",
                    held.namespace,
                    held.pod,
                    held.node,
                    key,
                    exc,
                )
