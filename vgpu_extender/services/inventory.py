"""Where node inventory comes from, and how it reaches the store and the index.

Three sources: the device plugin's node annotation (through the node watch, or the
Node objects kube-scheduler sends when ``nodeCacheCapable`` is false), a static file,
and the built-in demo. Each becomes a ``NodeInventory``; the store is written first,
then the index. A node whose annotation disappears or turns unreadable keeps its
devices (pods still hold them) but gets a ``problem``, so it receives no new pods and
filter shows why.

With a Kubernetes client, a vendor's node handshake (HAMi's ``hami.io/node-handshake-<CW>``,
Ascend's) is answered here: a node agent's report gets ``Requesting_<time>`` written
back, and a node whose agent leaves a request unanswered for 60 s while the node
advertises none of the vendor's devices keeps that vendor's devices, marked unhealthy:
no new pod lands on them, the pods there keep their shares, and the node's other
vendors' devices stay usable (HAMi drops the devices from its cache; keeping them
unhealthy is the same for new pods, and a filter answer says ``CardNotHealth`` rather
than that the node has no NPUs). A node is looked at again when such a verdict may
change with nothing on it changing. Standalone, there is no handshake.

Node objects in a scheduling request are evidence, never authority: anyone who can
reach the verbs can send them. Only standalone (no cluster to watch) does a request
register a node, and only one the extender does not know yet (``admit``), into the
index at once and into the store in the background (``NodeWriter``): a known node is
changed or removed only by the admin API, the inventory file or the node watch.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from vgpu_extender import store
from vgpu_extender.domain import Device, InventoryError, NodeInventory, RequestError
from vgpu_extender.domain.quantity import parse_quantity
from vgpu_extender.engine import AllocationError
from vgpu_extender.kube import KubeClient, KubeError, MalformedObject
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.node_writer import NodeRechecks, NodeWriter
from vgpu_extender.store.errors import StoreUnavailable, classify, is_busy
from vgpu_extender.store.node_batch import insert_new_nodes
from vgpu_extender.store.sessions import Sessions
from vgpu_extender.vendors import Vendor, VendorSet
from vgpu_extender.vendors.base import NodeFacts, NodeHandshake

logger = logging.getLogger(__name__)

#: The most names of unusable (or just admitted) Node objects remembered from requests.
UNUSABLE_KEPT = 10_000
#: Listed Node objects written per store transaction (``observe_listing``).
LISTING_BATCH = 250
#: Nodes mirrored in the index per hold of its lock: some 0.04 ms a node of 8 GPUs, so
#: a filter waits half a millisecond at most.
MIRROR_SLICE = 10
#: Inventory source recorded for nodes applied from their Node objects.
LISTED_SOURCE = "annotation"


@dataclass(frozen=True, slots=True)
class _Change:
    """A Node object whose inventory is to be written; ``seen`` is marked once it is."""

    name: str
    seen: tuple[str, tuple[Any, ...]]
    inventory: NodeInventory


@dataclass(frozen=True, slots=True)
class NodeView:
    """The few fields of a Node object that carry inventory."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    #: ``status.allocatable``, when read with the rest (None: read it if a handshake
    #: needs it).
    allocatable: Mapping[str, str] | None = None
    #: ``status.capacity``, when read with the rest: the inventory of vendors whose
    #: devices HAMi reads from the node's capacity (None: not read).
    capacity: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A Node object known by name and resourceVersion; ``load`` reads the rest.

    kube-scheduler resends every Node object with every request in non-cache mode;
    reading labels and annotations only when the resourceVersion changed keeps that
    mode's cost near the cost of finding the names.
    """

    name: str
    resource_version: str
    load: Callable[[], NodeView]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while objects that all live on are made by the ten
    thousand (a first request's 5,000 nodes of 8 devices): its passes over them free
    nothing and took some 40 % of that work."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def with_split_count(devices: Iterable[Device], split_count: int) -> tuple[Device, ...]:
    """Devices whose registration omits ``count`` (Go's omitempty of 0) get the default."""
    return tuple(d if d.count > 0 else dataclasses.replace(d, count=split_count) for d in devices)


def node_inventory(
    view: NodeView,
    vendor: Vendor | VendorSet,
    *,
    previous: NodeInventory | None,
    split_count: int,
) -> NodeInventory | None:
    """The inventory a Node object states (every vendor's devices on it), or None for a
    node that never had one.

    A missing, empty or unreadable annotation on a node that had devices keeps those
    devices (pods may hold them) with ``problem`` set, so nothing new lands there.
    """
    vendors = VendorSet.of(vendor)
    key = " / ".join(vendors.inventory_keys())
    kept = previous.devices if previous is not None else ()
    problem = ""
    devices: tuple[Device, ...] = kept
    try:
        decoded = vendors.decode_node(
            NodeFacts(view.name, view.labels, view.annotations, view.capacity or {})
        )
    except InventoryError as exc:
        problem = f"annotation {key} unreadable: {exc}"
    else:
        if decoded is None:
            if previous is None:
                return None
            problem = f"annotation {key} missing"
        else:
            devices = with_split_count(decoded, split_count)
            if not devices:
                problem = f"annotation {key} lists no devices"
                devices = kept
    try:
        cordoned = vendors.decode_cordons(view.annotations)
    except InventoryError as exc:
        cordon_key = " / ".join(vendors.cordon_keys())
        problem = problem or f"annotation {cordon_key} unreadable: {exc}"
        cordoned = previous.cordoned if previous is not None else frozenset()
    known = {d.uuid for d in devices}
    return NodeInventory(
        name=view.name,
        devices=devices,
        labels=dict(view.labels),
        cordoned=frozenset(u for u in cordoned if u in known),
        problem=problem,
    )


def load_inventory_file(
    path: Path, vendor: Vendor | VendorSet, *, split_count: int
) -> list[NodeInventory]:
    """Nodes from a JSON or YAML file: ``{"nodes": [{"name", "labels", "devices": [...]}]}``.

    Devices are objects in the first vendor's inventory form (NVIDIA's:
    ``hami.io/node-nvidia-register`` JSON). Raises
    ``InventoryError`` naming the file, the node and the field.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"inventory file {str(path)!r}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        raise InventoryError(f"inventory file {str(path)!r} is not JSON or YAML: {exc}") from None
    return parse_inventory_document(data, vendor, split_count=split_count, where=str(path))


def parse_inventory_document(
    data: object, vendor: Vendor | VendorSet, *, split_count: int, where: str = "inventory"
) -> list[NodeInventory]:
    """Nodes from the decoded inventory document (see ``load_inventory_file``)."""
    decode = VendorSet.of(vendor).primary.decode_inventory
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), list):
        raise InventoryError(f"{where}: expected an object with a 'nodes' list")
    nodes: list[NodeInventory] = []
    seen: set[str] = set()
    for position, item in enumerate(data["nodes"]):
        at = f"{where}: nodes[{position}]"
        if not isinstance(item, Mapping):
            raise InventoryError(f"{at}: expected an object, got {item!r}")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InventoryError(f"{at}.name: must be a non-empty string, got {name!r}")
        if name in seen:
            raise InventoryError(f"{at}.name: node {name!r} is listed twice")
        seen.add(name)
        labels = item.get("labels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise InventoryError(f"{at}.labels: must map strings to strings, got {labels!r}")
        devices = item.get("devices")
        if not isinstance(devices, list):
            raise InventoryError(f"{at}.devices: must be a list, got {devices!r}")
        try:
            decoded = decode(json.dumps(devices))
        except InventoryError as exc:
            raise InventoryError(f"{at}.devices: {exc}") from None
        nodes.append(
            NodeInventory(
                name=name,
                devices=with_split_count(decoded, split_count),
                labels=dict(labels),
            )
        )
    return nodes


class InventoryService:
    """Writes inventories to the store, then mirrors them in the index."""

    def __init__(
        self,
        *,
        cluster: ClusterState,
        sessions: Sessions,
        split_count: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        kube: KubeClient | None = None,
    ) -> None:
        self._cluster = cluster
        self._sessions = sessions
        self._split_count = split_count
        self._clock = clock
        #: Node name -> (resourceVersion, annotation/label signature) last applied from a
        #: Node object; an unchanged resourceVersion skips even the signature.
        self._seen: dict[str, tuple[str, tuple[Any, ...]]] = {}
        #: Node name -> resourceVersion of a request's Node object that offered no usable
        #: inventory (none, an unreadable one, one the store refused), so the same
        #: version is not read again; the oldest go past ``UNUSABLE_KEPT``.
        self._unusable: dict[str, str] = {}
        #: Node name -> resourceVersion of a node registered from a request whose write
        #: the store has not refused (so that a refusal can mark that version unusable).
        self._admitted: dict[str, str] = {}
        #: Guards the changes of ``_unusable`` and ``_admitted`` (the writer's thread
        #: reports refusals).
        self._marks = threading.Lock()
        self._writer = NodeWriter(sessions=sessions, clock=clock, on_refused=self._refused)
        #: Where handshakes are answered (None: standalone, no handshake).
        self._kube = kube
        self._handshakes: tuple[tuple[str, NodeHandshake], ...] = (
            tuple(
                (vendor.name, vendor.handshake)
                for vendor in cluster.vendors.members
                if vendor.handshake is not None
            )
            if kube is not None
            else ()
        )
        self._rechecks = NodeRechecks(look=self.recheck, clock=clock)
        #: Node name -> the vendors whose devices there a handshake made unusable.
        self._shaken_off: dict[str, frozenset[str]] = {}
        #: One observer at a time: the node watch and the rechecks' thread.
        self._observing = threading.Lock()

    def register(self, inventories: Sequence[NodeInventory], *, source: str) -> None:
        """Record inventories in one transaction, then in the index. All or nothing."""
        # What a request registered and the store has yet to get is superseded.
        self._writer.cancel(inventory.name for inventory in inventories)
        now = self._clock()
        with self._sessions.begin() as session:
            for inventory in inventories:
                store.upsert_node(session, inventory=inventory, source=source, now=now)
        try:
            self._cluster.upsert_nodes(inventories)
        except AllocationError:
            logger.exception("index refused an inventory the store accepted; reloading")
            self._cluster.load(self._sessions)

    def remove(self, name: str) -> store.NodeRemoval:
        """Forget a node, or, while pods still hold its devices, keep it marked absent
        (``store.NODE_ABSENT``: no new pod lands there) with their allocations."""
        self._writer.cancel([name])
        with self._sessions.begin() as session:
            outcome = store.remove_node(session, name=name, now=self._clock())
        if outcome is store.NodeRemoval.ABSENT:
            with self._cluster.lock:
                index = self._cluster.index
                known = name in index
                if known:
                    absent = dataclasses.replace(index.inventory(name), problem=store.NODE_ABSENT)
                    index.upsert_node(absent)
            if not known:
                self._cluster.refresh_node(self._sessions, name)
        else:
            with self._cluster.lock:
                self._cluster.index.remove_node(name)
        self._seen.pop(name, None)
        return outcome

    def observe(self, views: Iterable[NodeView | NodeRef]) -> int:
        """Apply the inventory of Node objects that changed since last seen.

        Returns how many nodes were updated. A node whose inventory cannot be written
        (a device UUID claimed by another node) is logged and left as it was: one bad
        node must not fail a scheduling request.
        """
        with self._observing:
            return self._observe(views)

    def _observe(self, views: Iterable[NodeView | NodeRef]) -> int:
        updated = 0
        for item in views:
            change = self._change_of(item)
            if change is None or not self._register_one(change.inventory):
                continue
            self._seen[change.name] = change.seen
            updated += 1
        return updated

    def observe_listing(
        self,
        views: Sequence[NodeView],
        *,
        batch_size: int = LISTING_BATCH,
        on_progress: Callable[[int], None] | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> int:
        """``observe`` for a whole listing of Node objects (the first sync, a relist):
        the changed nodes are written a batch at a time, one transaction each, and
        mirrored in the index a slice at a time, so the verbs get the index's lock in
        between. ``on_progress`` hears how many views are done after each batch;
        ``stopping`` ends the work between batches. Returns how many nodes were
        updated. A store out of reach or busy raises (the caller retries the listing);
        any other refusal of a batch is settled node by node.
        """
        updated = done = 0
        for start in range(0, len(views), batch_size):
            if stopping is not None and stopping():
                break
            chunk = views[start : start + batch_size]
            with self._observing, collector_paused():
                updated += self._observe_batch(chunk)
            done += len(chunk)
            if on_progress is not None:
                on_progress(done)
        return updated

    def _observe_batch(self, views: Sequence[NodeView]) -> int:
        changes = [change for view in views if (change := self._change_of(view)) is not None]
        if not changes:
            return 0
        written = self._register_batch([change.inventory for change in changes])
        for change in changes:
            if change.name in written:
                self._seen[change.name] = change.seen
        return len(written)

    def _change_of(self, item: NodeView | NodeRef) -> _Change | None:
        """The inventory a Node object brings, when it differs from the index's; None
        when there is nothing to write (the object is then marked seen)."""
        seen = self._seen.get(item.name)
        if seen is not None and item.resource_version and seen[0] == item.resource_version:
            return None
        view = item.load() if isinstance(item, NodeRef) else item
        signature = self._signature(view)
        marked = (view.resource_version, signature)
        if seen is not None and seen[1] == signature:
            self._seen[view.name] = marked
            return None
        with self._cluster.lock:
            previous = (
                self._cluster.index.inventory(view.name)
                if view.name in self._cluster.index
                else None
            )
        inventory = node_inventory(
            view, self._cluster.vendors, previous=previous, split_count=self._split_count
        )
        if inventory is not None and self._handshakes:
            inventory = self._shake_hands(view, inventory)
        if inventory is None or inventory == previous:
            self._seen[view.name] = marked
            return None
        return _Change(view.name, marked, inventory)

    def _register_batch(self, inventories: Sequence[NodeInventory]) -> set[str]:
        """Write ``inventories`` in one transaction (the nodes the store lacks in bulk),
        then mirror them in the index; the names registered. A refused batch (a device
        UUID another node holds, a name another replica inserted meanwhile) goes node by
        node; a store out of reach raises."""
        names = [inventory.name for inventory in inventories]
        self._writer.cancel(names)
        now = self._clock()
        try:
            with self._sessions.begin() as session:
                held = insert_new_nodes(
                    session, inventories=inventories, source=LISTED_SOURCE, now=now
                )
                for inventory in held:
                    store.upsert_node(session, inventory=inventory, source=LISTED_SOURCE, now=now)
        except store.FAILURES as exc:
            error = classify(exc, "write nodes")
            if isinstance(error, StoreUnavailable) or is_busy(error):
                raise error from exc  # node by node would meet the same
            logger.info("a batch of %d listed nodes refused, each alone now: %s", len(names), error)
            return {inventory.name for inventory in inventories if self._register_one(inventory)}
        self._mirror(inventories)
        return set(names)

    def _mirror(self, inventories: Sequence[NodeInventory]) -> None:
        """Into the index, a slice per hold of its lock."""
        try:
            for start in range(0, len(inventories), MIRROR_SLICE):
                self._cluster.upsert_nodes(inventories[start : start + MIRROR_SLICE])
        except AllocationError:
            logger.exception("index refused an inventory the store accepted; reloading")
            self._cluster.load(self._sessions)

    def _register_one(self, inventory: NodeInventory, *, attempts: int = 2) -> bool:
        """Register one node; a second try covers another replica inserting the same new
        node at the same moment (the loser's insert hits the unique name)."""
        for attempt in range(attempts):
            try:
                self.register([inventory], source=LISTED_SOURCE)
                return True
            except (store.StoreError, AllocationError) as exc:
                final = attempt + 1 == attempts or type(exc) is not store.StoreError
                if final:
                    logger.warning("inventory of node %s not applied: %s", inventory.name, exc)
                    return False
        return False

    def admit(self, items: Sequence[NodeView | NodeRef]) -> int:
        """Register the nodes among a request's Node objects that the extender does not
        know yet; a known node is left exactly as it is. Returns how many were added.

        Into the index now, so this request and the next see them; into the store in
        the background, batched (``NodeWriter``), so a first request with thousands of
        nodes answers within kube-scheduler's timeout. A node without a usable
        inventory (no annotation, an unreadable one) is not registered.
        """
        index = self._cluster.index
        with self._cluster.lock:
            unknown = [
                item
                for item in items
                if item.name not in index
                and not (
                    item.resource_version and self._unusable.get(item.name) == item.resource_version
                )
            ]
        if not unknown:
            return 0
        vendor = self._cluster.vendors
        fresh: list[NodeInventory] = []
        versions: dict[str, str] = {}
        with collector_paused():
            for item in unknown:
                view = item.load() if isinstance(item, NodeRef) else item
                inventory = node_inventory(
                    view, vendor, previous=None, split_count=self._split_count
                )
                if inventory is None or inventory.problem or not inventory.devices:
                    self._mark(self._unusable, view.name, view.resource_version)
                    continue
                fresh.append(inventory)
                versions[inventory.name] = view.resource_version
        added: list[NodeInventory] = []
        with self._cluster.lock:
            # Another request may have got there first; the same name twice, the first.
            named: dict[str, NodeInventory] = {}
            for inventory in fresh:
                if inventory.name not in index:
                    named.setdefault(inventory.name, inventory)
            try:
                index.add_nodes(list(named.values()))  # all at once, the usual case
                added = list(named.values())
            except AllocationError:  # one of them lists a device UUID another holds
                for inventory in named.values():
                    try:
                        index.add_nodes([inventory])
                    except AllocationError as exc:
                        logger.warning(
                            "node %s from a request not registered: %s", inventory.name, exc
                        )
                        continue
                    added.append(inventory)
            with self._marks:
                for inventory in added:
                    self._unusable.pop(inventory.name, None)
            for inventory in added:
                if versions.get(inventory.name):
                    self._mark(self._admitted, inventory.name, versions[inventory.name])
        if added:
            self._writer.submit(added)
            logger.info("%d nodes registered from a request's Node objects", len(added))
        return len(added)

    def persist(self, name: str) -> None:
        """Make sure a node registered from a request is in the store (a bind to it is
        about to write rows that refer to it). Raises ``StoreError``."""
        self._writer.flush(name)

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every node registered from requests is in the store."""
        return self._writer.drain(timeout_s)

    def stop(self) -> None:
        """Write what is still pending, then end the background writer."""
        self._rechecks.stop()
        self._writer.stop()

    # ------------------------------------------------------------------ handshakes
    def recheck(self, name: str) -> None:
        """Read the node again and apply it, even unchanged (a handshake verdict may
        have changed with time alone)."""
        if self._kube is None:
            return
        try:
            node = self._kube.get_node(name)
            if node is None:
                return
            view = NodeView(
                name=kobj.name(node),
                labels=kobj.labels(node),
                annotations=kobj.annotations(node),
                resource_version=kobj.resource_version(node),
                allocatable=_allocatable_of(node),
                capacity=capacity_of(node),
            )
        except (KubeError, MalformedObject) as exc:
            logger.warning("node %s not read again for its handshake: %s", name, exc)
            self._rechecks.set(name, self._clock() + RECHECK_RETRY)
            return
        self.forget(name)
        self.observe([view])

    def rechecks_due(self) -> dict[str, datetime]:
        """The nodes to be read again for their handshakes, and when."""
        return self._rechecks.due()

    def _shake_hands(self, view: NodeView, inventory: NodeInventory) -> NodeInventory:
        """Answer every vendor's handshake on the node; its devices marked unhealthy for
        each vendor whose verdict says they are unusable."""
        now = self._clock()
        read: dict[str, Mapping[str, str]] = {}

        def allocatable(resource: str) -> int:
            if view.allocatable is not None:
                values = view.allocatable
            else:
                if "status" not in read:
                    read["status"] = self._read_allocatable(view.name)
                values = read["status"]
            try:
                return 1 if parse_quantity(values.get(resource, "0")) > 0 else 0
            except RequestError:
                return 0

        writes: dict[str, str | None] = {}
        unusable: dict[str, str] = {}
        recheck: datetime | None = None
        for word, handshake in self._handshakes:
            verdict = handshake.check(
                view.annotations, now, functools.partial(allocatable, handshake.resource)
            )
            if verdict is None:
                continue
            if verdict.write is not None and view.annotations.get(handshake.annotation) != (
                verdict.write
            ):
                writes[handshake.annotation] = verdict.write
            if not verdict.healthy:
                unusable[word] = verdict.why
            if verdict.recheck_at is not None:
                recheck = (
                    verdict.recheck_at if recheck is None else min(recheck, verdict.recheck_at)
                )
        if writes:
            self._write_handshakes(view.name, writes)
        self._rechecks.set(view.name, recheck)
        self._report(view.name, unusable)
        if not unusable:
            return inventory
        devices = tuple(
            dataclasses.replace(d, healthy=False) if d.vendor in unusable and d.healthy else d
            for d in inventory.devices
        )
        return dataclasses.replace(inventory, devices=devices)

    def _read_allocatable(self, name: str) -> Mapping[str, str]:
        assert self._kube is not None  # handshakes run only with a client
        try:
            node = self._kube.get_node(name)
        except KubeError as exc:
            logger.warning("node %s: allocatable not read for its handshake: %s", name, exc)
            return {}
        return _allocatable_of(node) if node is not None else {}

    def _write_handshakes(self, name: str, writes: Mapping[str, str | None]) -> None:
        assert self._kube is not None
        try:
            self._kube.patch_node_annotations(name, writes)
        except KubeError as exc:
            # The next report of the node's agent (or the next look) tries again.
            logger.warning("node %s: handshake %s not written: %s", name, dict(writes), exc)

    def _report(self, name: str, unusable: Mapping[str, str]) -> None:
        """Log a change of which vendors' devices a handshake made unusable."""
        now_off = frozenset(unusable)
        before = self._shaken_off.get(name, frozenset())
        if now_off == before:
            return
        for word in sorted(now_off - before):
            logger.warning("node %s: %s devices unusable: %s", name, word, unusable[word])
        for word in sorted(before - now_off):
            logger.info("node %s: %s devices usable again (handshake answered)", name, word)
        if now_off:
            self._shaken_off[name] = now_off
        else:
            self._shaken_off.pop(name, None)

    def _refused(self, inventory: NodeInventory, exc: store.StoreError) -> None:
        """The store will never take this node: take it out of the index again (nothing
        can hold its devices: a bind writes its node first)."""
        logger.warning("node %s from a request refused by the store: %s", inventory.name, exc)
        with self._cluster.lock:
            index = self._cluster.index
            if inventory.name in index and index.inventory(inventory.name) == inventory:
                index.remove_node(inventory.name)
        # The same Node object is not admitted again (to be refused again) until it
        # changes.
        with self._marks:
            version = self._admitted.pop(inventory.name, None)
        if version:
            self._mark(self._unusable, inventory.name, version)

    def _mark(self, marks: dict[str, str], name: str, version: str) -> None:
        """Record ``name`` at ``version`` in ``marks``, the newest; past
        ``UNUSABLE_KEPT`` names the oldest go (requests may carry any names)."""
        with self._marks:
            marks.pop(name, None)
            marks[name] = version
            while len(marks) > UNUSABLE_KEPT:
                del marks[next(iter(marks))]

    def forget(self, name: str) -> None:
        """Make the next Node object of ``name`` apply even if unchanged."""
        self._seen.pop(name, None)

    def _signature(self, view: NodeView) -> tuple[Any, ...]:
        vendors = self._cluster.vendors
        annotations = view.annotations
        capacity = view.capacity or {}
        return (
            tuple(annotations.get(key) for key in vendors.node_keys()),
            tuple(annotations.get(key) for key in vendors.cordon_keys()),
            tuple(capacity.get(key) for key in vendors.capacity_keys()),
            tuple(sorted(view.labels.items())),
            # A node agent's report is answered even when its inventory is unchanged.
            tuple(annotations.get(handshake.annotation) for _, handshake in self._handshakes),
        )


#: When a node could not be read again for its handshake, the next try.
RECHECK_RETRY = timedelta(seconds=15)


def _allocatable_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    return _status_quantities(node, "allocatable")


def capacity_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    """A Node object's ``status.capacity``, as strings (empty when it has none)."""
    return _status_quantities(node, "capacity")


def _status_quantities(node: Mapping[str, Any], field: str) -> Mapping[str, str]:
    status = node.get("status")
    values = status.get(field) if isinstance(status, Mapping) else None
    if not isinstance(values, Mapping):
        return {}
    return {str(key): str(value) for key, value in values.items()}
