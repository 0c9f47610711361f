"""``lookahead``: FGD that also looks one typical pod ahead.

FGD scores a pod's placement by the change of the node's fragmentation alone. It does not
ask what the placement does for the pods that come next: a 320-milli share on a fresh GPU
leaves 680 milli that a later 650 fills to 30, the same share beside a 470 leaves 210
that almost nothing fills. ``lookahead`` adds, for the best candidates, one greedy step
of the typical pods: the next pod m (weight ``p_m``) goes wherever its own FGD change
``D_m`` is largest, so the cluster's outlook after placing on candidate c is

    L(c) = sum_m p_m [max(A_m(c), O_m(c)) - B_m]

where ``A_m(c)`` is m's best change on c's node after the placement, ``O_m(c)`` the best
elsewhere (the best ``B_m`` over all nodes, or the second best when c's node alone held
it) and ``B_m`` the best before; in milli. The score is FGD's integer score plus
``weight * L / 40`` (40 milli is one score point near zero).

Only pods that take one device (a share or a whole one) look ahead, and only typical
shapes of one device are looked at; other pods are scored as ``fragmentation`` scores
them. Each node state's best ``D_m`` is worked out once and kept (between two pods one
node changes); the after-states are evaluated for the ``beam`` best (node state, device)
pairs within ``window`` score points of the best, the rest keep FGD's score.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec
from vgpu_extender.policies.fragment_math import (
    POINT_MILLI,
    BoolArr,
    ClassStats,
    CompiledShapes,
    Devices,
    IntArr,
    device_fits,
    paper_score,
    share,
    taken,
)
from vgpu_extender.policies.fragmentation import (
    Fragmentation,
    FragmentationArgs,
    _cpu_after,
    one_device_delta,
    one_share,
)
from vgpu_extender.policies.typical_pods import ShapeCounter


@dataclass(frozen=True, slots=True)
class LookaheadArgs(FragmentationArgs):
    """``lookahead``'s arguments: ``fragmentation``'s, and the weight of the outlook
    (score points per 40 milli of it), the beam size and its window in score points."""

    weight: float = 1.0
    beam: int = 32
    window: float = 1.0

    def __post_init__(self) -> None:
        FragmentationArgs.__post_init__(self)
        for name in ("weight", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ArgumentError(name, f"must be a number >= 0, not {value!r}")
        if isinstance(self.beam, bool) or not isinstance(self.beam, int) or self.beam < 1:
            raise ArgumentError("beam", f"must be an integer >= 1, not {self.beam!r}")


@dataclass(slots=True)
class Outlook:
    """The one-device typical shapes, and the best change each could make per node state
    (cached by state id, for one version of the typical pods and of the state ids)."""

    weight: FloatVec
    cpu: IntVec
    klass: IntVec
    key: tuple[int, int] = (-1, -1)
    best: dict[int, FloatVec] = field(default_factory=dict)

    @classmethod
    def of(cls, shapes: CompiledShapes) -> Outlook:
        one = np.flatnonzero(shapes.count == 1)
        return cls(weight=shapes.weight[one], cpu=shapes.cpu[one], klass=shapes.klass[one])

    def best_changes(self, d: Devices, shapes: CompiledShapes) -> FloatVec:
        """Per node (row of ``d``) and shape: the largest change of F one pod of the shape
        makes on the node (-inf where it fits nowhere on it). ``one_device_after`` per
        shape, with the device arithmetic shared by the shapes of one class."""
        out = np.full((len(d.cpu), len(self.weight)), -np.inf, dtype=np.float64)
        if not len(d.cpu) or not len(self.weight):
            return out
        stats = ClassStats.of(d, shapes)
        before = stats.fragmentation(shapes, d.cpu)
        for u in np.unique(self.klass).tolist():
            klass = shapes.classes[u]
            fit, base, parts = _after_parts(d, shapes, stats, klass.container)
            if stats.type_ok[u] is not None:
                fit = fit & stats.type_ok[u]
            for m in np.flatnonzero(self.klass == u).tolist():
                cpu_after = _cpu_after(d.cpu, int(self.cpu[m]))
                kept = shapes.class_weights(stats.fit_count, cpu_after)
                lost = shapes.class_weights(stats.fit_count - 1, cpu_after)
                after = base.copy()
                for v, (drop, fit_sum) in enumerate(parts):
                    after -= np.where(drop, lost[v][:, None], kept[v][:, None]) * fit_sum
                ok = fit & (cpu_after >= 0)[:, None]
                change = np.where(ok, before[:, None] - after, -np.inf)
                out[:, m] = change.max(axis=1)
        return out


def _after_parts(
    d: Devices, shapes: CompiledShapes, stats: ClassStats, container: ContainerRequest
) -> tuple[BoolArr, FloatVec, list[tuple[BoolArr, IntArr]]]:
    """What ``one_device_after`` computes before it reads host CPU: where one share of
    ``container`` fits, the free capacity after it, and per class the devices that stop
    fitting and the class's free capacity after."""
    fit = device_fits(container, d.mem_free, d.cores_free, d.slots_free, d, None)
    mem2, cores2, slots2 = taken(container, d, fit)
    g, g2 = stats.g, share(mem2, cores2, slots2, d)
    base: FloatVec = (stats.total[:, None] - g + g2).astype(np.float64)
    parts: list[tuple[BoolArr, IntArr]] = []
    for u, klass in enumerate(shapes.classes):
        before = stats.fit[u]
        after = device_fits(klass.container, mem2, cores2, slots2, d, stats.type_ok[u])
        fit_sum: IntArr = (
            stats.fit_sum[u][:, None] - np.where(before, g, 0) + np.where(after, g2, 0)
        )
        parts.append((before & ~after, fit_sum))
    return fit, base, parts


@dataclass(slots=True)
class Lookahead(Fragmentation):
    """FGD with a one-pod outlook for pods that take one device."""

    name: str = "lookahead"
    #: The outlook reads the best places elsewhere in the cluster.
    scores_by_state: ClassVar[bool] = False
    weight: float = 1.0
    beam: int = 32
    window: float = 1.0
    _outlook: Outlook | None = field(default=None, repr=False)

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        container = one_share(request)
        if self.weight == 0 or container is None:
            return Fragmentation._score_distinct(self, index, request, rows, d)
        delta = one_device_delta(d, self.compiled(), container, request.cpu_milli)
        first = paper_score(delta)
        total = first + self._outlook_points(index, rows, d, container, request, first, delta)
        return self._settle(d, request, container, total, delta if self.raw_devices else first)

    def _current_outlook(self, index: ClusterIndex, shapes: CompiledShapes) -> Outlook:
        outlook = self._outlook
        key = (self._compiled[0], self._states.generation)
        if outlook is None or outlook.key[0] != key[0]:
            outlook = Outlook.of(shapes)
        if outlook.key != key:
            outlook.best.clear()
            outlook.key = key
        self._outlook = outlook
        return outlook

    def _outlook_points(
        self,
        index: ClusterIndex,
        rows: IntVec,
        d: Devices,
        container: ContainerRequest,
        request: PodRequest,
        first: FloatVec,
        delta: FloatVec,
    ) -> FloatVec:
        """``weight * L / 40`` per (node state, device): computed for the beam, the
        smallest computed value elsewhere (0 where the pod does not fit)."""
        shapes = self.compiled()
        outlook = self._current_outlook(index, shapes)
        points = np.zeros(first.shape, dtype=np.float64)
        if not len(outlook.weight):
            return points
        # The beam: node states whose best device is within the window of the best
        # score; each placed on its best device (integer score, then raw change).
        fits = np.isfinite(delta)
        ranked = np.where(fits, first + 1e-6 * np.where(fits, delta, 0.0), -np.inf)
        device_of = np.argmax(ranked, axis=1)
        best_first = first[np.arange(len(first)), device_of]
        ceiling = float(best_first[np.isfinite(best_first)].max())
        node_at = np.flatnonzero(np.isfinite(best_first) & (best_first >= ceiling - self.window))
        node_at = node_at[: self.beam]
        device_at = device_of[node_at]
        after = d.take(node_at)
        where = np.zeros(after.mem_free.shape, dtype=np.bool_)
        where[np.arange(len(node_at)), device_at] = True
        mem, cores, slots = taken(container, after, where)
        after = replace(
            after,
            mem_free=mem,
            cores_free=cores,
            slots_free=slots,
            cpu=_cpu_after(after.cpu, request.cpu_milli),
        )
        valid = self._valid_rows(index)
        everywhere, ahead = self._everywhere(index, shapes, outlook, valid, after)
        if everywhere.shape[0] == 0:
            return points
        best1 = everywhere.max(axis=0)
        best2 = (
            -np.partition(-everywhere, 1, axis=0)[1]
            if len(everywhere) > 1
            else np.full_like(best1, -np.inf)
        )
        # Elsewhere: the best before, unless the candidate's own node alone held it.
        mine = everywhere[np.searchsorted(valid, rows[node_at])]
        alone = (mine >= best1[None, :]) & (best2[None, :] < best1[None, :])
        elsewhere = np.where(alone, best2[None, :], best1[None, :])
        # A shape that fits nowhere before gains nothing (and -inf - -inf is no number).
        known = np.isfinite(best1)
        reached = np.maximum(ahead, elsewhere)
        base = np.where(known, best1, 0.0)[None, :]
        gain = np.where(known[None, :] & np.isfinite(reached), reached - base, 0.0)
        # Whole points only: finer differences would break the ties the ranks break.
        value = np.round(self.weight * (gain @ outlook.weight) / POINT_MILLI)
        points.fill(min(0.0, float(value.min())))
        points[node_at, :] = value[:, None]
        return points

    def _valid_rows(self, index: ClusterIndex) -> IntVec:
        out: IntVec = np.flatnonzero(index.cols.node_ok).astype(np.int64)
        return out

    def _everywhere(
        self,
        index: ClusterIndex,
        shapes: CompiledShapes,
        outlook: Outlook,
        valid: IntVec,
        extra: Devices,
    ) -> tuple[FloatVec, FloatVec]:
        """Per valid node, its state's best change per shape (states not seen before are
        computed and kept), and the same for the nodes ``extra``, in one pass."""
        ids = self._states.ids(index)
        if self._states.generation != outlook.key[1]:  # the ids were renumbered
            outlook.best.clear()
            outlook.key = (outlook.key[0], self._states.generation)
        state_ids = ids[valid]
        unique, first = np.unique(state_ids, return_index=True)
        missing = [i for i, s in enumerate(unique.tolist()) if s not in outlook.best]
        fresh = Devices.of_rows(index, valid[first[missing]])
        computed = outlook.best_changes(_stacked(fresh, extra), shapes)
        for j, i in enumerate(missing):
            outlook.best[int(unique[i])] = computed[j]
        if not len(unique):
            return np.zeros((0, len(outlook.weight))), computed[len(missing) :]
        table = np.stack([outlook.best[int(s)] for s in unique.tolist()])
        return table[np.searchsorted(unique, state_ids)], computed[len(missing) :]


def _stacked(a: Devices, b: Devices) -> Devices:
    """The nodes of ``a`` then those of ``b`` (same index, same device columns)."""

    def both(x: IntArr, y: IntArr) -> IntArr:
        out: IntArr = np.concatenate([x, y])
        return out

    return Devices(
        usable=np.concatenate([a.usable, b.usable]),
        type_id=both(a.type_id, b.type_id),
        types=a.types,
        mem_total=both(a.mem_total, b.mem_total),
        mem_free=both(a.mem_free, b.mem_free),
        cores_total=both(a.cores_total, b.cores_total),
        cores_free=both(a.cores_free, b.cores_free),
        slots_total=both(a.slots_total, b.slots_total),
        slots_free=both(a.slots_free, b.slots_free),
        cpu=both(a.cpu, b.cpu),
        share=a.share,
        mem_quantum=both(a.mem_quantum, b.mem_quantum),
        mem_piece=both(a.mem_piece, b.mem_piece),
    )


def build_lookahead(args: LookaheadArgs) -> Lookahead:
    """The policy from its arguments: fixed typical pods when given, else learned online."""
    fixed = tuple(args.typical_pods)
    return Lookahead(
        shapes=fixed,
        learner=None if fixed else ShapeCounter(),
        quantize=args.quantize,
        raw_devices=args.raw_devices,
        host_pack=args.host_pack,
        host_strand=args.host_strand,
        weight=args.weight,
        beam=args.beam,
        window=args.window,
    )
