"""``sum-squares``: FGD whose one-device shares go where Sum-of-Squares packing says.

Sum-of-Squares (Csirik, Johnson, Kenyon, Orlin, Shor, Weber, JACM 2006) packs items of
discrete sizes online by putting each into the bin that minimises ``sum_g N(g)^2``, where
``N(g)`` counts the partly filled bins with gap ``g``. Here a bin is a device and the gap
its free capacity in milli (``fragment_math.share``), counted over every device of the
cluster; free and exactly filled devices are not counted. A share of ``s`` that moves a
device from gap ``g`` to ``g - s`` changes the sum by

    SS(g -> g') = [0 < g' < 1000] (2 N(g') + 1) + [0 < g < 1000] (1 - 2 N(g))

(a fresh device: ``g = 1000``; an exact fill: ``g' = 0``). With ``live_gaps`` (the
default) a device counts only while one share of some typical pod fits it: a gap nothing
typical fits is as good as full, so SS does not shun near-exact fills once such slivers
pile up (counting them costs 0.4 pt on the openb trace, docs/simulation.md). ``N`` is
kept between pods (``GapBook``: only rows whose stamp moved are read again).

For a pod that takes one device ``sum-squares`` scores every fitting (node, device) as
FGD does; the candidates within ``window`` score points of the best are eligible, and of
those only the ones of least ``SS`` keep their score (the others drop out), so SS picks
the gap and FGD the node and device among that gap's candidates (ties by the paper's
ranks, as FGD's). ``window`` 0: SS only breaks FGD's ties.

Other pods (whole devices on several GPUs, several containers, host only) are placed as
``fragmentation`` places them; a whole-device pod changes no gap's count, so SS leaves it
to FGD too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec
from vgpu_extender.policies.fragment_math import (
    MILLI,
    BoolArr,
    CompiledShapes,
    Devices,
    IntArr,
    device_fits,
    share,
    taken,
)
from vgpu_extender.policies.fragmentation import (
    Fragmentation,
    FragmentationArgs,
    one_device_delta,
    one_share,
)
from vgpu_extender.policies.typical_pods import ShapeCounter


@dataclass(frozen=True, slots=True)
class SumSquaresArgs(FragmentationArgs):
    """``sum-squares``' arguments: ``fragmentation``'s, the FGD score window (points) in
    which SS chooses (``inf``: among all fitting devices), and whether gaps too small for
    every typical share are left uncounted."""

    window: float = math.inf
    live_gaps: bool = True

    def __post_init__(self) -> None:
        FragmentationArgs.__post_init__(self)
        w = self.window
        if isinstance(w, bool) or not isinstance(w, int | float) or not w >= 0:
            raise ArgumentError("window", f"must be a number >= 0, not {w!r}")
        if not isinstance(self.live_gaps, bool):
            raise ArgumentError("live_gaps", f"must be a bool, not {self.live_gaps!r}")


def ss_change(counts: IntArr, g: IntArr, g2: IntArr, live: BoolArr, live2: BoolArr) -> IntArr:
    """The change of ``sum N^2`` when devices go from gap ``g`` to ``g2``; ``live`` and
    ``live2``: whether the device is counted before and after (a free or full device is
    never counted)."""
    into = np.where(live2 & (g2 > 0) & (g2 < MILLI), 2 * counts[g2] + 1, 0)
    out_of = np.where(live & (g > 0) & (g < MILLI), 1 - 2 * counts[g], 0)
    out: IntArr = into + out_of
    return out


def live_devices(
    d: Devices, shapes: CompiledShapes, free: tuple[IntArr, IntArr, IntArr] | None = None
) -> BoolArr:
    """Devices that one share of some typical class fits (free capacity ``free``, else
    the devices' own)."""
    mem, cores, slots = free if free is not None else (d.mem_free, d.cores_free, d.slots_free)
    out = np.zeros(mem.shape, dtype=np.bool_)
    for klass in shapes.classes:
        out |= device_fits(klass.container, mem, cores, slots, d, d.type_ok(klass.types))
    return out


@dataclass(slots=True)
class GapBook:
    """The gap of every device of the cluster (-1: not counted) and ``N`` per gap, kept
    up to date row by row: between two pods only the rows whose stamp moved are read."""

    key: tuple[object, ...] = ()
    stamps: IntArr = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gap: IntArr = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    counts: IntArr = field(default_factory=lambda: np.zeros(MILLI + 1, dtype=np.int64))

    def update(
        self,
        index: ClusterIndex,
        shapes: CompiledShapes,
        version: int,
        *,
        live: bool,
    ) -> IntArr:
        """``N`` for the index as it is now (``version``: of the typical pods; with
        ``live``, only devices some typical class fits are counted)."""
        cols = index.cols
        stamps = index.row_stamps[: cols.rows]
        key = (id(index), index.topology_version, cols.usable.shape, version, live)
        if self.key != key:
            self.key = key
            self.stamps = np.full(cols.rows, -1, dtype=np.int64)
            self.gap = np.full(cols.usable.shape, -1, dtype=np.int64)
            self.counts = np.zeros(MILLI + 1, dtype=np.int64)
        changed = np.flatnonzero(stamps != self.stamps)
        if len(changed):
            old = self.gap[changed]
            np.subtract.at(self.counts, old[old >= 0], 1)
            new = _counted_gaps(index, shapes, changed, live=live)
            self.gap[changed] = new
            np.add.at(self.counts, new[new >= 0], 1)
            self.stamps[changed] = stamps[changed]
        return self.counts


def _counted_gaps(
    index: ClusterIndex, shapes: CompiledShapes, rows: IntArr, *, live: bool
) -> IntArr:
    """Each device's gap where it is counted, else -1."""
    d = Devices.of_rows(index, rows)
    g = share(d.mem_free, d.cores_free, d.slots_free, d)
    counted = (g > 0) & (g < MILLI) & index.cols.node_ok[rows][:, None]
    if live:
        counted &= live_devices(d, shapes)
    out: IntArr = np.where(counted, g, -1)
    return out


def ss_of(
    d: Devices,
    shapes: CompiledShapes,
    container: ContainerRequest,
    counts: IntArr,
    *,
    live: bool,
) -> IntArr:
    """``SS`` per device of ``d`` for one share of ``container`` (where it fits)."""
    fit = device_fits(container, d.mem_free, d.cores_free, d.slots_free, d, None)
    after = taken(container, d, fit)
    g = share(d.mem_free, d.cores_free, d.slots_free, d)
    g2 = np.where(fit, share(*after, d), g)
    if live:
        before_live = live_devices(d, shapes)
        after_live = live_devices(d, shapes, after)
    else:
        before_live = after_live = np.ones(g.shape, dtype=np.bool_)
    return ss_change(counts, g, g2, before_live, after_live)


@dataclass(slots=True)
class GapChoice:
    """The SS step both SS policies share: the cluster's gap counts (kept between pods),
    the candidates of least ``SS`` among those within ``window`` points of the best
    score, and the device order on the chosen node."""

    live: bool = True
    window: float = math.inf
    book: GapBook = field(default_factory=GapBook)
    #: ``N`` as the last one-device pod was scored (its device choice reads it).
    counts: IntArr | None = None

    def keep(
        self,
        index: ClusterIndex,
        d: Devices,
        shapes: CompiledShapes,
        version: int,
        container: ContainerRequest,
        score: FloatVec,
    ) -> BoolArr:
        """The (node, device) candidates of ``d`` SS keeps (``score``: FGD's, -inf where
        the share does not fit)."""
        counts = self.book.update(index, shapes, version, live=self.live)
        self.counts = counts
        fits = np.isfinite(score)
        if not fits.any():
            return fits
        ss = ss_of(d, shapes, container, counts, live=self.live)
        eligible = fits & (score >= float(score[fits].max()) - self.window)
        out: BoolArr = eligible & (ss == ss[eligible].min())
        return out

    def order(
        self,
        state: NodeState,
        shapes: CompiledShapes,
        container: ContainerRequest,
        ranked: list[int],
    ) -> list[int]:
        """``ranked`` (a device order) with the devices of least ``SS`` first."""
        counts = self.counts
        if counts is None or container.count != 1 or len(ranked) <= 1:
            return ranked
        ss = ss_of(Devices.of_state(state), shapes, container, counts, live=self.live)
        key = ss[0].tolist()
        return sorted(ranked, key=lambda s: key[s])  # stable: the given order within a class


@dataclass(slots=True)
class SumSquares(Fragmentation):
    """FGD with Sum-of-Squares choosing the gap of one-device shares."""

    name: str = "sum-squares"
    #: SS reads the gap counts of the whole cluster.
    scores_by_state: ClassVar[bool] = False
    choice: GapChoice = field(default_factory=GapChoice)

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        container = one_share(request)
        if container is None:
            self.choice.counts = None
            return Fragmentation._score_distinct(self, index, request, rows, d)
        shapes = self.compiled()
        delta = one_device_delta(d, shapes, container, request.cpu_milli)
        score = np.where(np.isfinite(delta), self._combine(delta), -np.inf)
        keep = self.choice.keep(index, d, shapes, self._compiled[0], container, score)
        score = np.where(keep, score, -np.inf)
        order = np.where(keep, delta, -np.inf) if self.raw_devices else score
        return self._settle(d, request, container, score, order)

    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        """FGD's order, the devices of least ``SS`` first (the class the node score
        chose, where the node has one)."""
        ranked = Fragmentation.rank_devices(self, state, container, candidates)
        return self.choice.order(state, self.compiled(), container, ranked)


def build_sum_squares(args: SumSquaresArgs) -> SumSquares:
    """The policy from its arguments: fixed typical pods when given, else learned online."""
    fixed = tuple(args.typical_pods)
    return SumSquares(
        shapes=fixed,
        learner=None if fixed else ShapeCounter(),
        quantize=args.quantize,
        raw_devices=args.raw_devices,
        host_pack=args.host_pack,
        host_strand=args.host_strand,
        choice=GapChoice(live=args.live_gaps, window=args.window),
    )
