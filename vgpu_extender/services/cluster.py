"""The in-memory cluster state the verbs read: the index, the planner and their lock.

The store is the durable truth; this is its mirror for the hot path. Every read or
write of the index happens under ``lock``, held only for in-memory work (never across
a database or Kubernetes call), so filter never waits on I/O.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from vgpu_extender import store
from vgpu_extender.domain import NodeInventory, PodAssignment
from vgpu_extender.engine import AllocationError, ClusterIndex
from vgpu_extender.engine.framework import Planner, Profile
from vgpu_extender.policies import default_profile
from vgpu_extender.vendors import Vendor, VendorSet

logger = logging.getLogger(__name__)


class ClusterState:
    """The index, the planner over it, the vendors, and the lock that guards them.

    ``profile``: the plug-ins and defaults every placement uses (the built-in plug-ins with
    HAMi's defaults unless given); planners over other indexes (preemption's scratch
    copies) share it.
    """

    def __init__(
        self,
        *,
        vendor: Vendor | VendorSet,
        profile: Profile | None = None,
    ) -> None:
        #: The vendors served (one vendor is a set of one).
        self.vendors = VendorSet.of(vendor)
        self.index = ClusterIndex(shares=self.vendors.shares)
        self.profile = profile if profile is not None else default_profile()
        self.planner = Planner(self.index, self.profile)
        self.lock = threading.RLock()

    # ----------------------------------------------------------------- loading
    def load(self, sessions: store.Sessions) -> tuple[int, int]:
        """Rebuild the index from the store. Returns (nodes, pods) loaded."""
        with sessions() as session:
            inventories = store.load_inventories(session)
            pods = store.assignments(session)
        with self.lock:
            for name in self.index.node_names():
                self.index.remove_node(name)
            for inventory in inventories:
                self.index.upsert_node(inventory)
            for uid, stored in pods.items():
                self._apply_unchecked(uid, stored.assignment)
        return len(inventories), len(pods)

    def refresh_node(self, sessions: store.Sessions, name: str) -> None:
        """Replace one node's inventory and allocations with what the store holds.

        Another replica may have bound pods there; the index learns them here before a
        bind is retried.
        """
        with sessions() as session:
            inventories = store.load_inventories(session, names=[name])
            pods = store.assignments(session, node=name)
        with self.lock:
            for allocation in self.index.pods_on(name):
                self.index.release(allocation.pod_uid)
            if not inventories:
                self.index.remove_node(name)
                return
            self.index.upsert_node(inventories[0])
            for uid, stored in pods.items():
                self.index.release(uid)  # the pod may be recorded on another node
                self._apply_unchecked(uid, stored.assignment)

    # ----------------------------------------------------------------- changes
    def upsert_nodes(self, inventories: Iterable[NodeInventory]) -> None:
        with self.lock:
            for inventory in inventories:
                self.index.upsert_node(inventory)

    def apply(self, uid: str, assignment: PodAssignment) -> None:
        """Record an assignment the store accepted (the store's check is the one that counts)."""
        with self.lock:
            held = self.index.allocation(uid)
            if held is not None and held.assignment == assignment:
                # Already mirrored (assumed at bind, or seen before): the row and its
                # stamp stay as they are, so remembered verdicts on it stay valid.
                return
            self.index.release(uid)
            self._apply_unchecked(uid, assignment)

    def assume(self, uid: str, assignment: PodAssignment) -> bool:
        """Record a choice before the store has it, so filters see the devices taken at
        once (kube-scheduler's "assume"); only for a pod the index holds nothing for.
        Returns whether it was recorded: the caller releases it if the store refuses."""
        with self.lock:
            if self.index.allocation(uid) is not None:
                return False
            self._apply_unchecked(uid, assignment)
            return True

    def release(self, uid: str) -> PodAssignment | None:
        with self.lock:
            return self.index.release(uid)

    def _apply_unchecked(self, uid: str, assignment: PodAssignment) -> None:
        try:
            self.index.apply(uid, assignment, check=False)
        except AllocationError as exc:
            # A device the store knows but the node no longer lists: the share is gone
            # with the device, so skipping it cannot over-allocate anything.
            logger.warning("allocation of pod %s not mirrored in the index: %s", uid, exc)
