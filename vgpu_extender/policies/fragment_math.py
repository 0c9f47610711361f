"""The arithmetic of FGD's fragmentation (spec: fgd.md §5), on NumPy arrays.

A node's *fragment* for a typical pod shape m is the free device capacity m could not use:
all of it when m does not fit the node at all (too few fitting devices, too little host CPU,
no device of an accepted type, or m asks for no device), else the free capacity of the
devices too small for one share of m. The node's fragmentation is the typical-pod-weighted
sum, ``F = sum_m p_m F(m) = R - sum_m p_m [m fits] Q_m``, where ``R`` is the node's free
capacity and ``Q_m`` that of its devices that fit one share of m; all in thousandths of a
device (milli).

Free capacity of a device, ``g``, is its usable share: the smaller of its free memory and
free cores as thousandths of the device (0 when it has no free slot or is unusable). That
is the trace's free GPU milli when pods take the same share of memory and cores, and stays
meaningful for vGPU pods that ask for memory only.

Shapes that ask the same of one device form a *class*; per node and class the engine-style
fit test runs once, and the shapes of a class differ only in device count and host CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu_extender.domain import ContainerRequest, DeviceSelector
from vgpu_extender.domain.share import Capacity, ShareModel
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import FloatVec, IntVec
from vgpu_extender.engine.rules import fitting_mask
from vgpu_extender.policies.typical_pods import WeightedShape

IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]

#: Thousandths of one device: the unit of free capacity and fragments.
MILLI = 1000
#: Milli of fragmentation change worth one score point near zero (the sigmoid's slope).
POINT_MILLI = MILLI / 25.0


# --------------------------------------------------------------------------- the shapes
@dataclass(frozen=True, slots=True)
class DeviceClass:
    """What a typical pod asks of one device; shapes that ask the same share it."""

    container: ContainerRequest
    types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CompiledShapes:
    """The typical pods that ask for devices, as arrays. CPU-only shapes add ``R`` to F
    whatever the node, so they only dilute the others' weights and drop out of the sums.

    ``by_class[u, m]`` is shape m's weight when m asks for device class u, else 0.
    """

    weight: FloatVec
    cpu: IntArr
    count: IntArr
    klass: IntArr
    by_class: npt.NDArray[np.float64]
    classes: tuple[DeviceClass, ...]

    @classmethod
    def of(cls, shapes: Sequence[WeightedShape]) -> CompiledShapes:
        classes: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
        rows: list[tuple[float, int, int, int]] = []
        total = sum(w for w, _ in shapes) or 1.0
        for share_of_pods, shape in shapes:
            if not shape.wants_devices:
                continue
            key = (shape.memory_mib, shape.memory_percent, shape.cores, shape.types)
            klass = classes.setdefault(key, len(classes))
            rows.append((share_of_pods / total, shape.cpu_milli, shape.count, klass))
        weight = np.array([r[0] for r in rows], dtype=np.float64)
        klass_of = np.array([r[3] for r in rows], dtype=np.int64)
        by_class = np.zeros((len(classes), len(rows)), dtype=np.float64)
        by_class[klass_of, np.arange(len(rows))] = weight
        return cls(
            weight=weight,
            cpu=np.array([r[1] for r in rows], dtype=np.int64),
            count=np.array([r[2] for r in rows], dtype=np.int64),
            klass=klass_of,
            by_class=by_class,
            classes=tuple(
                DeviceClass(ContainerRequest("typical", 1, mem, pct, cores), types)
                for (mem, pct, cores, types) in classes
            ),
        )

    def class_weights(self, count: IntArr, cpu: IntArr) -> npt.NDArray[np.float64]:
        """Per class and node: the weight of the class's shapes that fit the node, given
        the fitting devices per class (``count``, U x n) and the host CPU (n)."""
        fits = (count[self.klass] >= self.count[:, None]) & (cpu[None, :] >= self.cpu[:, None])
        out: npt.NDArray[np.float64] = self.by_class @ fits
        return out


# --------------------------------------------------------------------------- device views
@dataclass(slots=True)
class Devices:
    """Free capacity of n nodes x S device slots, and each node's host CPU."""

    usable: BoolArr
    type_id: IntArr
    types: tuple[str, ...]
    mem_total: IntArr
    mem_free: IntArr
    cores_total: IntArr
    cores_free: IntArr
    slots_total: IntArr
    slots_free: IntArr
    cpu: IntArr
    #: The stage table a share must pass on these devices.
    share: ShareModel
    #: Per device, the smallest and largest memory piece (MiB) a share takes.
    mem_quantum: IntArr
    mem_piece: IntArr

    @classmethod
    def of_rows(cls, index: ClusterIndex, rows: IntVec) -> Devices:
        c = index.cols
        return cls(
            usable=c.usable[rows],
            type_id=c.type_id[rows],
            types=index.types,
            mem_total=c.mem_total[rows],
            mem_free=c.mem_free[rows],
            cores_total=c.cores_total[rows],
            cores_free=c.cores_free[rows],
            slots_total=c.slots_total[rows],
            slots_free=c.slots_free[rows],
            cpu=c.cpu_free[rows],
            share=index.share,
            mem_quantum=c.mem_quantum[rows],
            mem_piece=c.mem_piece[rows],
        )

    @classmethod
    def of_state(cls, state: NodeState) -> Devices:
        types = tuple(dict.fromkeys(d.type for d in state.devices))
        models = [state.shares.of(d.vendor) for d in state.devices]
        pieces = [
            (max(m.memory_quantum, 1), m.memory_piece or d.memory_mib)
            for m, d in zip(models, state.devices, strict=True)
        ]
        return cls(
            usable=np.array([state.usable], dtype=np.bool_),
            type_id=np.array([[types.index(d.type) for d in state.devices]], dtype=np.int64),
            types=types,
            mem_total=np.array([state.mem_total], dtype=np.int64),
            mem_free=np.array([state.mem_free], dtype=np.int64),
            cores_total=np.array([state.cores_total], dtype=np.int64),
            cores_free=np.array([state.cores_free], dtype=np.int64),
            slots_total=np.array([state.slots_total], dtype=np.int64),
            slots_free=np.array([state.slots_free], dtype=np.int64),
            cpu=np.array([state.host_cpu_free], dtype=np.int64),
            share=state.share,
            mem_quantum=np.array([[q for q, _ in pieces]], dtype=np.int64),
            mem_piece=np.array([[p for _, p in pieces]], dtype=np.int64),
        )

    def take(self, positions: IntArr) -> Devices:
        return Devices(
            usable=self.usable[positions],
            type_id=self.type_id[positions],
            types=self.types,
            mem_total=self.mem_total[positions],
            mem_free=self.mem_free[positions],
            cores_total=self.cores_total[positions],
            cores_free=self.cores_free[positions],
            slots_total=self.slots_total[positions],
            slots_free=self.slots_free[positions],
            cpu=self.cpu[positions],
            share=self.share,
            mem_quantum=self.mem_quantum[positions],
            mem_piece=self.mem_piece[positions],
        )

    def total(self) -> Capacity:
        return Capacity(self.slots_total, self.mem_total, self.cores_total)

    def state_key(self, row: int) -> tuple[object, ...]:
        """One node's state as plain values, comparable with ``NodeState``'s."""
        n = int((self.type_id[row] >= 0).sum())
        return (
            tuple(self.types[t] for t in self.type_id[row, :n].tolist()),
            *(
                tuple(grid[row, :n].tolist())
                for grid in (
                    self.usable,
                    self.mem_total,
                    self.mem_free,
                    self.cores_total,
                    self.cores_free,
                    self.slots_total,
                    self.slots_free,
                )
            ),
            int(self.cpu[row]),
        )

    def type_ok(self, types: tuple[str, ...]) -> BoolArr | None:
        """Devices of a type the shape accepts (None: every type)."""
        if not types:
            return None
        selector = DeviceSelector(use_types=types)
        ids = [i for i, name in enumerate(self.types) if selector.accepts_type(name)]
        out: BoolArr = np.isin(self.type_id, np.array(ids, dtype=np.int64))
        return out


def node_state_key(state: NodeState) -> tuple[object, ...]:
    """``Devices.state_key`` of a node state."""
    return (
        tuple(d.type for d in state.devices),
        tuple(state.usable),
        tuple(state.mem_total),
        tuple(state.mem_free),
        tuple(state.cores_total),
        tuple(state.cores_free),
        tuple(state.slots_total),
        tuple(state.slots_free),
        state.host_cpu_free,
    )


def share(mem_free: IntArr, cores_free: IntArr, slots_free: IntArr, d: Devices) -> IntArr:
    """Free capacity ``g`` in milli: the smaller of free memory and free cores. Memory
    counts as far as the device's pieces can still be carved from it (whole quanta, at
    most a piece per free slot; all of it on an empty device): for memory in any amount
    (quantum 1, no piece limit) that is all of it."""
    quantum = np.maximum(d.mem_quantum, 1)  # 0 in the cells of no device
    carvable = np.minimum(mem_free // quantum * quantum, slots_free * d.mem_piece)
    mem_free = np.where(mem_free >= d.mem_total, mem_free, np.maximum(carvable, 0))
    mem = np.where(d.mem_total > 0, mem_free * MILLI // np.maximum(d.mem_total, 1), 0)
    cores = np.where(d.cores_total > 0, cores_free * MILLI // np.maximum(d.cores_total, 1), 0)
    out: IntArr = np.where(d.usable & (slots_free > 0), np.minimum(mem, cores), 0)
    return out


def device_fits(
    container: ContainerRequest,
    mem_free: IntArr,
    cores_free: IntArr,
    slots_free: IntArr,
    d: Devices,
    type_ok: BoolArr | None,
) -> BoolArr:
    """Devices that could hold one share of ``container``: the share model's stages,
    as the engine evaluates them."""
    free = Capacity(slots_free, mem_free, cores_free)
    ok = fitting_mask(d.share, free, d.total(), container, d.usable)
    if type_ok is not None:
        ok &= type_ok
    return ok


def taken(container: ContainerRequest, d: Devices, where: BoolArr) -> tuple[IntArr, IntArr, IntArr]:
    """Free memory, cores and slots after one share of ``container`` on ``where``."""
    used = d.share.consumed(d.total(), container)
    mem = np.where(where, d.mem_free - used.memory, d.mem_free)
    cores = np.where(where, d.cores_free - used.cores, d.cores_free)
    slots = np.where(where, d.slots_free - used.slots, d.slots_free)
    return mem, cores, slots


# --------------------------------------------------------------------------- F itself
@dataclass(slots=True)
class ClassStats:
    """Per node: free capacity ``g`` per device and its total ``R``; per device class:
    which devices fit one share, their free capacity summed, and how many there are."""

    g: IntArr
    total: IntArr
    fit: list[BoolArr]
    type_ok: list[BoolArr | None]
    fit_sum: IntArr
    fit_count: IntArr

    @classmethod
    def of(
        cls,
        d: Devices,
        shapes: CompiledShapes,
        free: tuple[IntArr, IntArr, IntArr] | None = None,
    ) -> ClassStats:
        mem, cores, slots = free if free is not None else (d.mem_free, d.cores_free, d.slots_free)
        g = share(mem, cores, slots, d)
        n = g.shape[0]
        fit: list[BoolArr] = []
        type_ok: list[BoolArr | None] = []
        fit_sum = np.zeros((len(shapes.classes), n), dtype=np.int64)
        fit_count = np.zeros((len(shapes.classes), n), dtype=np.int64)
        for u, klass in enumerate(shapes.classes):
            ok_type = d.type_ok(klass.types)
            ok = device_fits(klass.container, mem, cores, slots, d, ok_type)
            fit.append(ok)
            type_ok.append(ok_type)
            fit_sum[u] = np.where(ok, g, 0).sum(axis=1)
            fit_count[u] = ok.sum(axis=1)
        return cls(g, g.sum(axis=1), fit, type_ok, fit_sum, fit_count)

    def fragmentation(self, shapes: CompiledShapes, cpu: IntArr) -> FloatVec:
        """F per node with ``cpu`` host CPU free: ``R - sum_m p_m [m fits] Q_m``."""
        out: FloatVec = self.total - (shapes.class_weights(self.fit_count, cpu) * self.fit_sum).sum(
            axis=0
        )
        return out


def fragmentation(d: Devices, shapes: CompiledShapes) -> FloatVec:
    """F per node, in milli."""
    return ClassStats.of(d, shapes).fragmentation(shapes, d.cpu)


def one_device_after(
    d: Devices,
    shapes: CompiledShapes,
    stats: ClassStats,
    container: ContainerRequest,
    cpu_after: IntArr,
) -> FloatVec:
    """F after one share of ``container`` lands on each device (n x S; NaN where it
    cannot). Only that device changes, so each class's sum moves by that device's own
    contribution, and its count drops by at most one: the class weights need computing
    for two counts only."""
    fit = device_fits(container, d.mem_free, d.cores_free, d.slots_free, d, None)
    mem2, cores2, slots2 = taken(container, d, fit)
    g, g2 = stats.g, share(mem2, cores2, slots2, d)
    after_total = (stats.total[:, None] - g + g2).astype(np.float64)
    if len(shapes.classes):
        kept = shapes.class_weights(stats.fit_count, cpu_after)
        lost = shapes.class_weights(stats.fit_count - 1, cpu_after)
        for u, klass in enumerate(shapes.classes):
            before = stats.fit[u]
            after = device_fits(klass.container, mem2, cores2, slots2, d, stats.type_ok[u])
            fit_sum = stats.fit_sum[u][:, None] - np.where(before, g, 0) + np.where(after, g2, 0)
            weight = np.where(before & ~after, lost[u][:, None], kept[u][:, None])
            after_total -= weight * fit_sum
    out: FloatVec = np.where(fit, after_total, np.nan)
    return out


def paper_score(delta: FloatVec) -> FloatVec:
    """The artifact's integer score: ``floor(100 * sigmoid(delta / 1000))``."""
    out: FloatVec = np.floor(100.0 / (1.0 + np.exp(-delta / MILLI)))
    return out
