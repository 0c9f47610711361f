"""The cluster index: nodes, devices and allocations in memory, for the hot path.

The SQL store is the durable truth; this index mirrors it. Node names map to rows
once, on registration, never per request. Applying and releasing an assignment
updates the free columns in place.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter

import numpy as np

from vgpu_extender.domain import Device, DeviceUsage, NodeInventory, PodAssignment
from vgpu_extender.domain.share import ShareModel, ShareModels
from vgpu_extender.engine.columns import UNLIMITED, DeviceColumns, IntVec
from vgpu_extender.engine.fit_cache import FitCache
from vgpu_extender.engine.rejection_cache import RejectionCache
from vgpu_extender.engine.row_vectors import FloatVec, RowCompute, RowVectors
from vgpu_extender.vendors.registry import DEFAULT_SHARE

#: Candidate lists at least this long are remembered by ``rows_of``; shorter ones cost
#: less to look up than a comparison with a remembered list.
_MEMO_MIN_NAMES = 32


class AllocationError(ValueError):
    """An assignment cannot be applied: unknown node or device, or it would over-allocate."""


@dataclass(frozen=True, slots=True)
class Allocation:
    """A pod's assignment as held by the index, with its resolved per-slot usage."""

    pod_uid: str
    row: int
    assignment: PodAssignment
    usage: tuple[tuple[int, DeviceUsage], ...]
    cpu_milli: int = 0
    memory_mib: int = 0


class ClusterIndex:
    """Nodes, devices and allocations, with per-device NumPy columns."""

    def __init__(
        self,
        *,
        initial_nodes: int = 64,
        initial_slots: int = 8,
        share: ShareModel | None = None,
        shares: ShareModels | None = None,
    ) -> None:
        #: How a share of each vendor's devices is judged (the stage tables every fit
        #: evaluates), by vendor word; ``share`` alone makes it the one model of all.
        if shares is None:
            shares = ShareModels.one(share if share is not None else DEFAULT_SHARE)
        self.shares = shares
        # Slots stay a power of two, at least 8: count_per_row reads 8 cells per word.
        self.cols = DeviceColumns(initial_nodes, _next_power(max(8, initial_slots)))
        self._row_of: dict[str, int] = {}
        self._names: list[str | None] = [None] * initial_nodes
        self._free_rows: list[int] = list(range(initial_nodes - 1, -1, -1))
        self._inventory: dict[str, NodeInventory] = {}
        #: Per node, devices refused to new pods for an allocation conflict (kept
        #: across inventory updates and the node's removal; not part of the inventory).
        self._conflicted: dict[str, frozenset[str]] = {}
        self._devices: list[tuple[Device, ...]] = [()] * initial_nodes
        self._slot_of_uuid: dict[str, tuple[int, int]] = {}
        self._types: list[str] = []
        self._type_ids: dict[str, int] = {}
        #: Device kinds, (vendor, mode) pairs, interned like the types.
        self._kinds: list[tuple[str, str]] = []
        self._kind_ids: dict[tuple[str, str], int] = {}
        self._ask_masks: dict[tuple[str, str], tuple[int, np.ndarray | None]] = {}
        self._allocations: dict[str, Allocation] = {}
        self._pods_on_row: dict[int, set[str]] = {}
        self._version = 0
        self._topology_version = 0
        self._static_vectors: dict[Hashable, tuple[int, np.ndarray]] = {}
        self._recent_rows: list[tuple[Sequence[str], int, IntVec]] = []
        self._row_span = 0
        self._numa_cache: tuple[int, tuple[int, ...]] = (-1, ())
        # Per row, the version of its last change; rows never changed hold 0.
        self._stamps: IntVec = np.zeros(initial_nodes, dtype=np.int64)
        #: Rejections of recent request shapes, valid while their rows' stamps hold.
        self.rejection_cache = RejectionCache()
        #: Fit verdicts of recent request shapes and candidate lists, valid while their
        #: rows' stamps and the topology version hold.
        self.fit_cache = FitCache()
        #: Per-row values derived from each row's own state (node scores), valid while
        #: their rows' stamps hold.
        self.row_vectors = RowVectors()

    # ----------------------------------------------------------------- reading
    @property
    def version(self) -> int:
        """Bumped on every change; lets callers cache derived data safely."""
        return self._version

    @property
    def row_stamps(self) -> IntVec:
        """Per row, the ``version`` of the last change to anything of that row (its
        columns, inventory, cordons or allocations). Versions only grow, so an unchanged
        stamp means an unchanged row, even across a row's reuse by another node. Read
        only: the index owns it."""
        return self._stamps

    @property
    def topology_version(self) -> int:
        """Bumped when nodes or devices change (not on allocations): for caching static data."""
        return self._topology_version

    def static_vector(
        self, key: Hashable, build: Callable[[ClusterIndex], np.ndarray]
    ) -> np.ndarray:
        """A per-row vector derived from the inventory only (labels, say), built once and
        kept until nodes or devices change. Policies cache here, not in themselves, so
        the cache can never outlive or confuse the index it describes."""
        cached = self._static_vectors.get(key)
        if cached is None or cached[0] != self._topology_version:
            cached = (self._topology_version, build(self))
            self._static_vectors[key] = cached
        return cached[1]

    def row_vector(self, key: Hashable, compute: RowCompute) -> FloatVec:
        """A per-row vector derived from each row's own state only (its columns,
        inventory and allocations), indexed by row up to ``row_span``: ``compute(index,
        rows)`` gives the values of ``rows``, and runs only for rows changed since this
        ``key`` last read them. Read only."""
        span = max(self._row_span, 1)
        return self.row_vectors.vector(key, self, self._stamps[:span], compute)

    @property
    def numa_values(self) -> tuple[int, ...]:
        """Distinct NUMA node ids of all registered devices (cached until the next change)."""
        if self._numa_cache[0] != self._topology_version:
            values = sorted({dev.numa for devs in self._devices for dev in devs})
            self._numa_cache = (self._topology_version, tuple(values))
        return self._numa_cache[1]

    @property
    def share(self) -> ShareModel:
        """The default vendor's share model (a process of one vendor has only it)."""
        return self.shares.default

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(self._types)

    def ask_mask(self, vendor: str, mode: str = "") -> np.ndarray | None:
        """Devices of ``vendor`` (any, when empty) in ``mode`` (any, when empty), or None
        when every device the index holds qualifies (a process of one vendor: no mask to
        apply). Kept until nodes or devices change."""
        if not vendor and not mode:
            return None
        key = (vendor, mode)
        cached = self._ask_masks.get(key)
        if cached is None or cached[0] != self._topology_version:
            ids = [
                kid
                for kid, (kind_vendor, kind_mode) in enumerate(self._kinds)
                if (not vendor or kind_vendor == vendor) and (not mode or kind_mode == mode)
            ]
            mask = None if len(ids) == len(self._kinds) else np.isin(self.cols.kind_id, ids)
            cached = (self._topology_version, mask)
            self._ask_masks[key] = cached
        return cached[1]

    @property
    def row_span(self) -> int:
        """Every node's row is below this: whole-grid passes need look no further."""
        return self._row_span

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, name: object) -> bool:
        return name in self._row_of

    def node_names(self) -> list[str]:
        return list(self._row_of)

    def row_of(self, name: str) -> int | None:
        return self._row_of.get(name)

    def rows_of(self, names: Sequence[str]) -> IntVec:
        """Rows for names, -1 for unknown ones.

        The common case (every name known) is one C-level ``itemgetter`` call; only a
        request naming an unknown node pays for the per-name fallback.
        """
        if not names:
            return np.zeros(0, dtype=np.int64)
        # kube-scheduler sends the same lists again and again: the HTTP layer hands a
        # repeated list over as the same tuple (found by identity), and comparing lists
        # of equal strings is still far cheaper than hashing every name again.
        for cached_names, version, cached_rows in self._recent_rows:
            if version == self._topology_version and (
                cached_names is names or cached_names == names
            ):
                return cached_rows
        rows = self._lookup_rows(names)
        rows.flags.writeable = False
        if len(names) >= _MEMO_MIN_NAMES:  # short lists (bind's one node) must not evict
            kept = names if isinstance(names, tuple) else list(names)  # a copy unless immutable
            self._recent_rows = [(kept, self._topology_version, rows), *self._recent_rows[:1]]
        return rows

    def _lookup_rows(self, names: Sequence[str]) -> IntVec:
        try:
            found = itemgetter(*names)(self._row_of)
        except KeyError:
            get = self._row_of.get
            return np.fromiter((get(n, -1) for n in names), dtype=np.int64, count=len(names))
        if len(names) == 1:
            return np.array([found], dtype=np.int64)
        return np.fromiter(found, dtype=np.int64, count=len(names))

    def name_of(self, row: int) -> str:
        name = self._names[row]
        if name is None:
            raise KeyError(f"row {row} holds no node")
        return name

    def inventory(self, name: str) -> NodeInventory:
        return self._inventory[name]

    def devices(self, row: int) -> tuple[Device, ...]:
        return self._devices[row]

    def locate(self, uuid: str) -> tuple[int, int] | None:
        """(row, slot) of a device UUID."""
        return self._slot_of_uuid.get(uuid)

    def type_id(self, device_type: str) -> int:
        return self._type_ids.get(device_type, -1)

    def allocation(self, pod_uid: str) -> Allocation | None:
        return self._allocations.get(pod_uid)

    def allocations(self) -> Iterator[Allocation]:
        return iter(list(self._allocations.values()))

    def pods_on(self, name: str) -> list[Allocation]:
        row = self._row_of.get(name)
        if row is None:
            return []
        return [self._allocations[uid] for uid in sorted(self._pods_on_row.get(row, ()))]

    # ----------------------------------------------------------------- nodes
    def upsert_node(self, inventory: NodeInventory) -> None:
        """Add or replace a node's inventory, keeping the allocations that still apply."""
        self._check_uuids(inventory)
        self._version += 1
        self._topology_version += 1
        row = self._row_of.get(inventory.name)
        if row is None:
            row = self._take_row()
            self._row_of[inventory.name] = row
            self._names[row] = inventory.name
        self._stamps[row] = self._version
        for old in self._devices[row]:
            self._slot_of_uuid.pop(old.uuid, None)
        if len(inventory.devices) > self.cols.slots:
            self.cols = self.cols.resized(self.cols.rows, _next_power(len(inventory.devices)))
        cols = self.cols
        cols.clear_row(row)
        devices = tuple(inventory.devices)
        for slot, dev in enumerate(devices):
            self._slot_of_uuid[dev.uuid] = (row, slot)
            cols.valid[row, slot] = True
            cols.healthy[row, slot] = dev.healthy
            cols.cordoned[row, slot] = dev.uuid in inventory.cordoned
            cols.conflicted[row, slot] = dev.uuid in self._conflicted.get(inventory.name, ())
            cols.mem_total[row, slot] = cols.mem_free[row, slot] = dev.memory_mib
            cols.cores_total[row, slot] = cols.cores_free[row, slot] = dev.cores
            cols.slots_total[row, slot] = cols.slots_free[row, slot] = dev.count
            cols.numa[row, slot] = dev.numa
            cols.type_id[row, slot] = self._intern_type(dev.type)
            cols.kind_id[row, slot] = self._intern_kind(dev)
            cols.group[row, slot] = self._group_of(dev)
            cols.mem_quantum[row, slot], cols.mem_piece[row, slot] = self._pieces_of(dev)
        cols.node_ok[row] = not inventory.problem
        if inventory.cpu_milli is not None:
            cols.cpu_total[row] = cols.cpu_free[row] = inventory.cpu_milli
        if inventory.memory_mib is not None:
            cols.hostmem_total[row] = cols.hostmem_free[row] = inventory.memory_mib
        cols.refresh_usable(row)
        self._devices[row] = devices
        self._inventory[inventory.name] = inventory
        for uid in sorted(self._pods_on_row.get(row, set())):
            old_alloc = self._allocations[uid]
            self._allocations[uid] = self._resolve(uid, row, old_alloc.assignment, old_alloc)
            self._add_usage(self._allocations[uid], sign=-1)
        cols.refresh_row_sums(row)

    def add_nodes(self, inventories: Sequence[NodeInventory]) -> None:
        """Add nodes the index does not hold yet, as ``upsert_node`` would one by one,
        each column written once for all of them: the first sight of thousands of
        nodes (a scheduling request's Node objects) costs a few array writes, not a
        hundred small ones per node. Raises ``AllocationError``, adding none, for a
        node already held or listed twice, or a device UUID listed twice or held by
        another node."""
        fresh = list(inventories)
        listed: dict[str, str] = {}
        names: set[str] = set()
        for inventory in fresh:
            if inventory.name in self._row_of or inventory.name in names:
                raise AllocationError(f"node {inventory.name} is already registered")
            names.add(inventory.name)
            self._check_uuids(inventory)
            for dev in inventory.devices:
                other = listed.setdefault(dev.uuid, inventory.name)
                if other != inventory.name:
                    raise AllocationError(
                        f"device {dev.uuid} is listed by nodes {other} and {inventory.name}"
                    )
        if not fresh:
            return
        width = max(len(inventory.devices) for inventory in fresh)
        if width > self.cols.slots:
            self.cols = self.cols.resized(self.cols.rows, _next_power(width))
        rows = [self._take_row() for _ in fresh]
        self._version += 1
        self._topology_version += 1
        cols = self.cols
        at = np.asarray(rows, dtype=np.int64)
        cols.clear_rows(at)
        cell_rows: list[int] = []
        cell_slots: list[int] = []
        devices: list[Device] = []
        cordoned: list[bool] = []
        conflicted: list[bool] = []
        for row, inventory in zip(rows, fresh, strict=True):
            self._row_of[inventory.name] = row
            self._names[row] = inventory.name
            self._devices[row] = tuple(inventory.devices)
            self._inventory[inventory.name] = inventory
            held = self._conflicted.get(inventory.name, frozenset())
            for slot, dev in enumerate(inventory.devices):
                self._slot_of_uuid[dev.uuid] = (row, slot)
                cell_rows.append(row)
                cell_slots.append(slot)
                devices.append(dev)
                cordoned.append(dev.uuid in inventory.cordoned)
                conflicted.append(dev.uuid in held)
        self._stamps[at] = self._version
        cells = (np.asarray(cell_rows, dtype=np.int64), np.asarray(cell_slots, dtype=np.int64))
        cols.valid[cells] = True
        cols.healthy[cells] = [dev.healthy for dev in devices]
        cols.cordoned[cells] = cordoned
        cols.conflicted[cells] = conflicted
        for total, free, values in (
            (cols.mem_total, cols.mem_free, [dev.memory_mib for dev in devices]),
            (cols.cores_total, cols.cores_free, [dev.cores for dev in devices]),
            (cols.slots_total, cols.slots_free, [dev.count for dev in devices]),
        ):
            total[cells] = values
            free[cells] = values
        cols.numa[cells] = [dev.numa for dev in devices]
        cols.type_id[cells] = [self._intern_type(dev.type) for dev in devices]
        cols.kind_id[cells] = [self._intern_kind(dev) for dev in devices]
        cols.group[cells] = [self._group_of(dev) for dev in devices]
        pieces = [self._pieces_of(dev) for dev in devices]
        cols.mem_quantum[cells] = [quantum for quantum, _ in pieces]
        cols.mem_piece[cells] = [piece for _, piece in pieces]
        cols.node_ok[at] = [not inventory.problem for inventory in fresh]
        for row, inventory in zip(rows, fresh, strict=True):
            if inventory.cpu_milli is not None:
                cols.cpu_total[row] = cols.cpu_free[row] = inventory.cpu_milli
            if inventory.memory_mib is not None:
                cols.hostmem_total[row] = cols.hostmem_free[row] = inventory.memory_mib
        cols.refresh_rows(at)

    def _check_uuids(self, inventory: NodeInventory) -> None:
        """Refuse, before changing anything, a device UUID listed twice or held by another node."""
        seen: set[str] = set()
        for dev in inventory.devices:
            if dev.uuid in seen:
                raise AllocationError(f"device {dev.uuid} is listed twice by node {inventory.name}")
            seen.add(dev.uuid)
            where = self._slot_of_uuid.get(dev.uuid)
            owner = None if where is None else self._names[where[0]]
            if owner is not None and owner != inventory.name:
                raise AllocationError(
                    f"device {dev.uuid} of node {inventory.name} is already registered on {owner}"
                )

    def remove_node(self, name: str) -> list[str]:
        """Forget a node. Returns the pods whose allocations went with it."""
        row = self._row_of.pop(name, None)
        if row is None:
            return []
        self._version += 1
        self._topology_version += 1
        self._stamps[row] = self._version
        for dev in self._devices[row]:
            self._slot_of_uuid.pop(dev.uuid, None)
        gone = sorted(self._pods_on_row.pop(row, set()))
        for uid in gone:
            del self._allocations[uid]
        self.cols.clear_row(row)
        self._devices[row] = ()
        self._names[row] = None
        self._inventory.pop(name, None)
        # Conflict marks stay: a node removed and added again (the index rebuilt, an
        # inventory registered anew) keeps its conflicted devices from new pods.
        self._free_rows.append(row)
        return gone

    def set_cordoned(self, name: str, uuids: Iterable[str]) -> None:
        """Replace the set of cordoned devices of a node (HAMi's ``hami.io/device-cordon``)."""
        inv = self._inventory[name]
        wanted = frozenset(uuids)
        unknown = wanted - {d.uuid for d in inv.devices}
        if unknown:
            raise AllocationError(f"node {name} has no device {sorted(unknown)[0]}")
        self._version += 1
        row = self._row_of[name]
        self._stamps[row] = self._version
        for slot, dev in enumerate(self._devices[row]):
            self.cols.cordoned[row, slot] = dev.uuid in wanted
        self.cols.refresh_usable(row)
        self._inventory[name] = replace(inv, cordoned=wanted)

    def conflicted(self, name: str) -> frozenset[str]:
        """Devices of ``name`` refused to new pods for an allocation conflict (those
        marked, for a node the index does not hold now)."""
        marked = self._conflicted.get(name, frozenset())
        row = self._row_of.get(name)
        if row is None:
            return marked
        return marked & {d.uuid for d in self._devices[row]}

    def set_conflicted(self, name: str, uuids: Iterable[str]) -> None:
        """Replace the devices of a node refused to new pods because a pod running on
        them could not be recorded (it would over-commit them). Treated as a cordon:
        pods already there keep their devices. Devices the node does not list take no
        effect. The marks outlive the node's removal: a node not held now (or again)
        gets them when it is added; ``set_conflicted(name, ())`` clears them."""
        wanted = frozenset(uuids)
        if wanted == self._conflicted.get(name, frozenset()):
            return
        if wanted:
            self._conflicted[name] = wanted
        else:
            self._conflicted.pop(name, None)
        row = self._row_of.get(name)
        if row is None:
            return
        self._version += 1
        self._stamps[row] = self._version
        for slot, dev in enumerate(self._devices[row]):
            self.cols.conflicted[row, slot] = dev.uuid in wanted
        self.cols.refresh_usable(row)

    # ----------------------------------------------------------------- allocations
    def apply(
        self,
        pod_uid: str,
        assignment: PodAssignment,
        *,
        cpu_milli: int = 0,
        memory_mib: int = 0,
        check: bool = True,
    ) -> None:
        """Record a pod's assignment. With ``check`` it refuses to over-allocate."""
        if pod_uid in self._allocations:
            raise AllocationError(f"pod {pod_uid} already holds an allocation")
        row = self._row_of.get(assignment.node)
        if row is None:
            raise AllocationError(f"unknown node {assignment.node!r}")
        alloc = self._resolve(pod_uid, row, assignment, None, cpu_milli, memory_mib)
        if check:
            self._check_fits(alloc)
        self._version += 1
        self._stamps[row] = self._version
        self._allocations[pod_uid] = alloc
        self._pods_on_row.setdefault(row, set()).add(pod_uid)
        self._add_usage(alloc, sign=-1)

    def release(self, pod_uid: str) -> PodAssignment | None:
        """Give a pod's devices back; returns what it held, or None if it held nothing."""
        alloc = self._allocations.pop(pod_uid, None)
        if alloc is None:
            return None
        self._version += 1
        self._stamps[alloc.row] = self._version
        self._pods_on_row.get(alloc.row, set()).discard(pod_uid)
        self._add_usage(alloc, sign=+1)
        return alloc.assignment

    # ----------------------------------------------------------------- internals
    def _resolve(
        self,
        pod_uid: str,
        row: int,
        assignment: PodAssignment,
        previous: Allocation | None,
        cpu_milli: int = 0,
        memory_mib: int = 0,
    ) -> Allocation:
        usage: list[tuple[int, DeviceUsage]] = []
        for uuid, use in assignment.footprint().items():
            where = self._slot_of_uuid.get(uuid)
            if where is None or where[0] != row:
                if previous is not None:
                    continue  # the device left the node; its share is gone with it
                raise AllocationError(f"device {uuid} is not on node {assignment.node}")
            usage.append((where[1], use))
        if previous is not None:
            cpu_milli, memory_mib = previous.cpu_milli, previous.memory_mib
        return Allocation(pod_uid, row, assignment, tuple(usage), cpu_milli, memory_mib)

    def _check_fits(self, alloc: Allocation) -> None:
        cols, row = self.cols, alloc.row
        for slot, use in alloc.usage:
            uuid = self._devices[row][slot].uuid
            if use.memory_mib > cols.mem_free[row, slot]:
                raise AllocationError(
                    f"device {uuid}: memory {use.memory_mib} MiB > free {cols.mem_free[row, slot]}"
                )
            if use.cores > cols.cores_free[row, slot]:
                raise AllocationError(
                    f"device {uuid}: cores {use.cores} > free {cols.cores_free[row, slot]}"
                )
            if use.slots > cols.slots_free[row, slot]:
                raise AllocationError(f"device {uuid}: no free allocation slot")
        if alloc.cpu_milli > cols.cpu_free[row] or alloc.memory_mib > cols.hostmem_free[row]:
            raise AllocationError(f"node {self.name_of(row)}: host cpu or memory exhausted")

    def _add_usage(self, alloc: Allocation, *, sign: int) -> None:
        cols, row = self.cols, alloc.row
        for slot, use in alloc.usage:
            cols.mem_free[row, slot] += sign * use.memory_mib
            cols.cores_free[row, slot] += sign * use.cores
            cols.slots_free[row, slot] += sign * use.slots
            cols.row_mem_free[row] += sign * use.memory_mib
            cols.row_cores_free[row] += sign * use.cores
            cols.row_slots_free[row] += sign * use.slots
        if cols.cpu_total[row] != UNLIMITED:
            cols.cpu_free[row] += sign * alloc.cpu_milli
        if cols.hostmem_total[row] != UNLIMITED:
            cols.hostmem_free[row] += sign * alloc.memory_mib

    def _take_row(self) -> int:
        if not self._free_rows:
            old = self.cols.rows
            self.cols = self.cols.resized(old * 2, self.cols.slots)
            self._names.extend([None] * old)
            self._devices.extend([()] * old)
            self._stamps = np.concatenate([self._stamps, np.zeros(old, dtype=np.int64)])
            self._free_rows.extend(range(old * 2 - 1, old - 1, -1))
        row = self._free_rows.pop()
        self._row_span = max(self._row_span, row + 1)
        return row

    def _intern_type(self, device_type: str) -> int:
        tid = self._type_ids.get(device_type)
        if tid is None:
            tid = len(self._types)
            self._types.append(device_type)
            self._type_ids[device_type] = tid
        return tid

    def _group_of(self, device: Device) -> int:
        """The device's group under its vendor's share model (-1: none)."""
        key = self.shares.of(device.vendor).group_key
        value = device.custom(key) if key else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return -1
        return value

    def _pieces_of(self, device: Device) -> tuple[int, int]:
        """The smallest and largest memory piece of one share on the device."""
        share = self.shares.of(device.vendor)
        return max(share.memory_quantum, 1), share.memory_piece or device.memory_mib

    def _intern_kind(self, device: Device) -> int:
        kind = (device.vendor, device.mode)
        kid = self._kind_ids.get(kind)
        if kid is None:
            kid = len(self._kinds)
            self._kinds.append(kind)
            self._kind_ids[kind] = kid
        return kid


def _next_power(n: int) -> int:
    size = 1
    while size < n:
        size *= 2
    return size
