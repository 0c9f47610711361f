"""What operators can ask beyond reading: a dry run, the standalone inventory, cordons.

- ``what_if``: which nodes a pod would fit, the devices it would get on the best of
  them and why every other node would not. It goes through the same planner as filter
  and reserves nothing; the pod is not remembered for a later bind either.
- ``replace_inventory``: the whole standalone inventory, as the ``--inventory`` file
  states it. Nodes left out are forgotten, unless pods still hold their GPUs.
- ``set_cordon``: HAMi's ``hami.io/device-cordon``: a cordoned GPU takes no new pod and
  keeps the ones it has. With a cluster the node annotation is the truth (every replica
  sees it through its node watch), so it is written there; the store and the index are
  updated at once as well.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vgpu_extender import store
from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    DeviceGrant,
    InventoryError,
    NodeInventory,
    Rejection,
    Wording,
)
from vgpu_extender.engine import AllocationError, to_extender_scores
from vgpu_extender.kube import Conflict, KubeClient, KubeError
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.inventory_shrink import describe, held_beyond
from vgpu_extender.store.limits import NODE_NAME, ValueTooLong
from vgpu_extender.store.nodes import node_source
from vgpu_extender.store.sessions import Sessions
from vgpu_extender.vendors import Vendor

logger = logging.getLogger(__name__)

#: Attempts at the node annotation when someone else changes the node meanwhile.
CORDON_ATTEMPTS = 3


class NotFoundError(LookupError):
    """The node, device or pod named does not exist."""


class ConflictError(RuntimeError):
    """The request is understood but the current state forbids it."""


# The refusals of a change, by the answer the admin API gives them (tried in this
# order: a value too long is also bad input).
#: A string longer than the store's column for it (422).
TooLong = ValueTooLong
#: Bad input, naming the field and value (400).
INVALID: tuple[type[Exception], ...] = (InventoryError, store.StoreInputError)
#: The current state forbids the change (409).
CONFLICTS: tuple[type[Exception], ...] = (ConflictError, store.StoreConflict, AllocationError)
#: The longest node name the store holds.
NODE_NAME_LIMIT = NODE_NAME


# --------------------------------------------------------------------------- what-if
@dataclass(frozen=True, slots=True)
class Placement:
    """A node the pod fits, its score 0..10, and (for the best ones) the devices chosen."""

    node: str
    score: int
    containers: tuple[tuple[DeviceGrant, ...], ...] | None


@dataclass(frozen=True, slots=True)
class WhatIf:
    managed: bool
    fits: list[Placement]
    rejected: dict[str, Rejection]
    #: The words the rejections are to be read in (the vendor's).
    wording: Wording = NEUTRAL_WORDING


def what_if(
    cluster: ClusterState,
    pod: Mapping[str, Any],
    *,
    candidates: Sequence[str] | None = None,
    detail: int = 10,
) -> WhatIf:
    """Dry-run filter, prioritize and device choice. Raises ``RequestError`` on a bad pod.

    Devices are chosen for the ``detail`` best nodes only: the choice runs under the
    index lock, which filter needs too.
    """
    request = cluster.vendors.parse_pod(pod)
    wording = cluster.vendors.wording_for(request)
    planner = cluster.planner
    with cluster.lock:
        names = list(candidates) if candidates is not None else sorted(cluster.index.node_names())
        if not request.managed:
            return WhatIf(False, [Placement(name, 0, None) for name in names], {}, wording)
        result = planner.filter(request, names)
        rejected = dict(result.rejections)
        scores = to_extender_scores(planner.scores(request, result.rows)) if result.feasible else []
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], result.feasible[i]))
        fits: list[Placement] = []
        for i in order:
            node = result.feasible[i]
            containers = None
            if len(fits) < detail:
                chosen = planner.choose(request, node)
                if isinstance(chosen, Rejection):
                    rejected[node] = chosen
                    continue
                containers = chosen.containers
            fits.append(Placement(node, scores[i], containers))
    return WhatIf(True, fits, rejected, wording)


# --------------------------------------------------------------------------- inventory
@dataclass(frozen=True, slots=True)
class InventoryChange:
    registered: list[str]
    removed: list[str]


def replace_inventory(
    cluster: ClusterState,
    inventory: InventoryService,
    nodes: Sequence[NodeInventory],
    *,
    kube: KubeClient | None,
    sessions: Sessions | None = None,
) -> InventoryChange:
    """Make ``nodes`` the whole inventory. Raises ``ConflictError`` (changing nothing)
    with a cluster, whose node annotations are the inventory, when a node left out
    still holds pods, or when a device is left out or shrunk below what its pods hold
    (the pods named, from ``sessions`` when given); ``StoreError`` when the store
    refuses."""
    if kube is not None:
        raise ConflictError(
            "the inventory comes from the device plugin's node annotations while the "
            "extender runs with a cluster; PUT /api/v1/inventory is for standalone mode"
        )
    listed = {node.name for node in nodes}
    with cluster.lock:
        gone = sorted(set(cluster.index.node_names()) - listed)
        busy = {name: len(cluster.index.pods_on(name)) for name in gone}
    held = {name: n for name, n in busy.items() if n}
    if held:
        shown = ", ".join(f"{name} ({n} pods)" for name, n in sorted(held.items()))
        raise ConflictError(
            f"nodes left out of the inventory still hold pods: {shown}; "
            "list them, or wait until their pods are gone"
        )
    shortfalls = held_beyond(cluster, nodes)
    if shortfalls:
        raise ConflictError(describe(shortfalls, lambda node: _pod_names(sessions, node)))
    inventory.register(list(nodes), source="api")
    for name in gone:
        inventory.remove(name)
    return InventoryChange(registered=sorted(listed), removed=gone)


def _pod_names(sessions: Sessions | None, node: str) -> dict[str, str]:
    """UID to namespace/name of the pods the store holds on ``node`` ({} without it)."""
    if sessions is None:
        return {}
    with sessions() as session:
        pods = store.assignments(session, node=node)
    return {uid: f"{p.meta.namespace}/{p.meta.name}" for uid, p in pods.items()}


# --------------------------------------------------------------------------- cordon
@dataclass(frozen=True, slots=True)
class CordonState:
    node: str
    device: str
    cordoned: list[str]


def set_cordon(
    *,
    cluster: ClusterState,
    sessions: Sessions,
    kube: KubeClient | None,
    device: str,
    cordon: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> CordonState:
    """Cordon (or uncordon) one GPU by UUID. Raises ``NotFoundError`` for an unknown
    GPU, ``ConflictError`` when the node annotation cannot be written."""
    with cluster.lock:
        where = cluster.index.locate(device)
        if where is None:
            raise NotFoundError(f"no registered GPU has UUID {device!r}")
        node = cluster.index.name_of(where[0])
        current = cluster.index.inventory(node)
    if kube is not None:
        wanted = _cordon_annotation(cluster, kube, node, device, cordon)
    else:
        wanted = current.cordoned | {device} if cordon else current.cordoned - {device}
    known = {d.uuid for d in current.devices}
    wanted = frozenset(u for u in wanted if u in known)
    _store_cordon(sessions, current, wanted, clock())
    with cluster.lock:
        if node in cluster.index:
            cluster.index.set_cordoned(node, wanted)
    logger.info("GPU %s on %s %s", device, node, "cordoned" if cordon else "uncordoned")
    return CordonState(node=node, device=device, cordoned=sorted(wanted))


def _vendor_of(cluster: ClusterState, device: str) -> Vendor:
    """The vendor whose annotations list ``device`` (the primary for an unknown one)."""
    vendors = cluster.vendors
    with cluster.lock:
        where = cluster.index.locate(device)
        word = cluster.index.devices(where[0])[where[1]].vendor if where is not None else ""
    return vendors.get(word) or vendors.primary


def _cordon_annotation(
    cluster: ClusterState, kube: KubeClient, node: str, device: str, cordon: bool
) -> frozenset[str]:
    """Read-modify-write the node's cordon annotation, guarded by its resourceVersion."""
    vendor = _vendor_of(cluster, device)
    key = vendor.cordon_annotation
    for _attempt in range(CORDON_ATTEMPTS):
        try:
            obj = kube.get_node(node)
            if obj is None:
                raise NotFoundError(f"node {node!r} (of GPU {device!r}) is not in the cluster")
            raw = kobj.annotations(obj).get(key)
            try:
                listed = vendor.decode_cordon(raw) if raw else frozenset()
            except InventoryError:
                listed = frozenset()  # unreadable: rewritten from what we know
            wanted = listed | {device} if cordon else listed - {device}
            value = ",".join(sorted(wanted)) or None
            if value != raw:
                kube.patch_node_annotations(
                    node, {key: value}, resource_version=kobj.resource_version(obj)
                )
            return wanted
        except Conflict:
            continue
        except KubeError as exc:
            raise ConflictError(f"node {node}: annotation {key} not written: {exc}") from None
    raise ConflictError(f"node {node} kept changing; annotation {key} not written")


def _store_cordon(
    sessions: Sessions, inventory: NodeInventory, wanted: frozenset[str], now: datetime
) -> None:
    """Persist the cordoned set, keeping where the node's inventory came from."""
    with sessions.begin() as session:
        source = node_source(session, inventory.name)
        if source is None:
            raise NotFoundError(f"node {inventory.name!r} is not in the store")
        store.upsert_node(
            session,
            inventory=dataclasses.replace(inventory, cordoned=wanted),
            source=source,
            now=now,
        )
