"""Per-device columns: the NumPy arrays the fit runs on.

Devices live in a 2-D grid, one row per node and one column ("slot") per device of
that node, so that per-node questions ("how many devices of this node fit?") are a
row-wise reduction. Rows of removed nodes are recycled; the grid grows by doubling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntGrid = npt.NDArray[np.int64]
BoolGrid = npt.NDArray[np.bool_]
IntVec = npt.NDArray[np.int64]
BoolVec = npt.NDArray[np.bool_]

#: Host capacity used for nodes whose CPU and memory the engine does not track.
UNLIMITED = np.iinfo(np.int64).max // 4


@dataclass(slots=True)
class DeviceColumns:
    """Columns of the device grid plus the per-node host columns."""

    rows: int
    slots: int
    valid: BoolGrid = field(init=False)
    usable: BoolGrid = field(init=False)
    healthy: BoolGrid = field(init=False)
    cordoned: BoolGrid = field(init=False)
    #: Devices an import found over-committed: refused to new pods like cordoned ones.
    conflicted: BoolGrid = field(init=False)
    mem_total: IntGrid = field(init=False)
    mem_free: IntGrid = field(init=False)
    cores_total: IntGrid = field(init=False)
    cores_free: IntGrid = field(init=False)
    slots_total: IntGrid = field(init=False)
    slots_free: IntGrid = field(init=False)
    numa: IntGrid = field(init=False)
    type_id: IntGrid = field(init=False)
    #: The device's kind: its (vendor, mode) pair, interned by the index.
    kind_id: IntGrid = field(init=False)
    #: The device's group (its share model's ``group_key`` value, e.g. an HCCS ring), -1
    #: for none.
    group: IntGrid = field(init=False)
    #: The smallest and largest piece of memory (MiB) one share takes (the share model's
    #: ``memory_quantum`` and ``memory_piece``, the device's memory for no limit).
    mem_quantum: IntGrid = field(init=False)
    mem_piece: IntGrid = field(init=False)
    node_ok: BoolVec = field(init=False)
    #: Per-row sums of the device columns, kept current by the index (scoring reads them).
    row_mem_total: IntVec = field(init=False)
    row_mem_free: IntVec = field(init=False)
    row_cores_total: IntVec = field(init=False)
    row_cores_free: IntVec = field(init=False)
    row_slots_total: IntVec = field(init=False)
    row_slots_free: IntVec = field(init=False)
    cpu_total: IntVec = field(init=False)
    cpu_free: IntVec = field(init=False)
    hostmem_total: IntVec = field(init=False)
    hostmem_free: IntVec = field(init=False)

    def __post_init__(self) -> None:
        shape = (self.rows, self.slots)
        self.valid = np.zeros(shape, dtype=np.bool_)
        self.usable = np.zeros(shape, dtype=np.bool_)
        self.healthy = np.zeros(shape, dtype=np.bool_)
        self.cordoned = np.zeros(shape, dtype=np.bool_)
        self.conflicted = np.zeros(shape, dtype=np.bool_)
        self.mem_total = np.zeros(shape, dtype=np.int64)
        self.mem_free = np.zeros(shape, dtype=np.int64)
        self.cores_total = np.zeros(shape, dtype=np.int64)
        self.cores_free = np.zeros(shape, dtype=np.int64)
        self.slots_total = np.zeros(shape, dtype=np.int64)
        self.slots_free = np.zeros(shape, dtype=np.int64)
        self.numa = np.zeros(shape, dtype=np.int64)
        self.type_id = np.full(shape, -1, dtype=np.int64)
        self.kind_id = np.full(shape, -1, dtype=np.int64)
        self.group = np.full(shape, -1, dtype=np.int64)
        self.mem_quantum = np.zeros(shape, dtype=np.int64)
        self.mem_piece = np.zeros(shape, dtype=np.int64)
        self.node_ok = np.zeros(self.rows, dtype=np.bool_)
        for name in self._ROW_SUMS:
            setattr(self, name, np.zeros(self.rows, dtype=np.int64))
        self.cpu_total = np.full(self.rows, UNLIMITED, dtype=np.int64)
        self.cpu_free = np.full(self.rows, UNLIMITED, dtype=np.int64)
        self.hostmem_total = np.full(self.rows, UNLIMITED, dtype=np.int64)
        self.hostmem_free = np.full(self.rows, UNLIMITED, dtype=np.int64)

    _GRIDS = (
        "valid",
        "usable",
        "healthy",
        "cordoned",
        "conflicted",
        "mem_total",
        "mem_free",
        "cores_total",
        "cores_free",
        "slots_total",
        "slots_free",
        "numa",
        "type_id",
        "kind_id",
        "group",
        "mem_quantum",
        "mem_piece",
    )
    #: Grids whose empty cells hold -1 (no id), not 0.
    _ID_GRIDS = frozenset({"type_id", "kind_id", "group"})
    _ROW_SUMS = (
        "row_mem_total",
        "row_mem_free",
        "row_cores_total",
        "row_cores_free",
        "row_slots_total",
        "row_slots_free",
    )
    _VECTORS = ("node_ok", "cpu_total", "cpu_free", "hostmem_total", "hostmem_free", *_ROW_SUMS)

    def resized(self, rows: int, slots: int) -> DeviceColumns:
        """A copy with at least ``rows`` x ``slots`` capacity, contents preserved."""
        grown = DeviceColumns(max(rows, self.rows), max(slots, self.slots))
        for name in self._GRIDS:
            getattr(grown, name)[: self.rows, : self.slots] = getattr(self, name)
        for name in self._VECTORS:
            getattr(grown, name)[: self.rows] = getattr(self, name)
        return grown

    def clear_row(self, row: int) -> None:
        for name in self._GRIDS:
            grid = getattr(self, name)
            grid[row] = -1 if name in self._ID_GRIDS else 0
        self.node_ok[row] = False
        for name in self._ROW_SUMS:
            getattr(self, name)[row] = 0
        self.cpu_total[row] = self.cpu_free[row] = UNLIMITED
        self.hostmem_total[row] = self.hostmem_free[row] = UNLIMITED

    def refresh_row_sums(self, row: int) -> None:
        self.row_mem_total[row] = self.mem_total[row].sum()
        self.row_mem_free[row] = self.mem_free[row].sum()
        self.row_cores_total[row] = self.cores_total[row].sum()
        self.row_cores_free[row] = self.cores_free[row].sum()
        self.row_slots_total[row] = self.slots_total[row].sum()
        self.row_slots_free[row] = self.slots_free[row].sum()

    def clear_rows(self, rows: IntVec) -> None:
        """``clear_row`` for many rows at once."""
        for name in self._GRIDS:
            getattr(self, name)[rows] = -1 if name in self._ID_GRIDS else 0
        self.node_ok[rows] = False
        for name in self._ROW_SUMS:
            getattr(self, name)[rows] = 0
        self.cpu_total[rows] = self.cpu_free[rows] = UNLIMITED
        self.hostmem_total[rows] = self.hostmem_free[rows] = UNLIMITED

    def refresh_rows(self, rows: IntVec) -> None:
        """``refresh_usable`` and ``refresh_row_sums`` for many rows at once."""
        self.usable[rows] = (
            self.valid[rows]
            & self.healthy[rows]
            & ~self.cordoned[rows]
            & ~self.conflicted[rows]
            & self.node_ok[rows][:, None]
        )
        self.row_mem_total[rows] = self.mem_total[rows].sum(axis=1)
        self.row_mem_free[rows] = self.mem_free[rows].sum(axis=1)
        self.row_cores_total[rows] = self.cores_total[rows].sum(axis=1)
        self.row_cores_free[rows] = self.cores_free[rows].sum(axis=1)
        self.row_slots_total[rows] = self.slots_total[rows].sum(axis=1)
        self.row_slots_free[rows] = self.slots_free[rows].sum(axis=1)

    def refresh_usable(self, row: int) -> None:
        """Recompute the static usability of one node's devices."""
        self.usable[row] = (
            self.valid[row]
            & self.healthy[row]
            & ~self.cordoned[row]
            & ~self.conflicted[row]
            & self.node_ok[row]
        )


_BYTE_ONES = np.uint64(0x0101010101010101)
_TOP_BYTE = np.uint64(56)


def count_per_row(ok: BoolGrid) -> IntVec:
    """True cells per row.

    NumPy reduces a short inner axis slowly, so this counts eight cells at a time: a bool
    is one byte holding 0 or 1, eight of them read as one uint64, and multiplying by
    0x0101...01 adds all eight bytes into the top byte. Needs a multiple of 8 slots,
    which the grid guarantees.
    """
    words = np.ascontiguousarray(ok).view(np.uint64)
    counts = (words * _BYTE_ONES) >> _TOP_BYTE
    if counts.shape[1] == 1:
        return counts[:, 0].astype(np.int64)
    summed: IntVec = counts.sum(axis=1, dtype=np.int64)
    return summed


def per_node_count(ok: BoolGrid, numa: IntGrid, numa_values: Sequence[int] | None) -> IntVec:
    """True cells per row; with NUMA values given, the most on any one NUMA node of the row."""
    if numa_values is None:
        return count_per_row(ok)
    best = np.zeros(ok.shape[0], dtype=np.int64)
    for value in numa_values:
        np.maximum(best, count_per_row(ok & (numa == value)), out=best)
    return best
