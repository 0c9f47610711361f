"""``fragmentation``: Fragmentation Gradient Descent (Weng et al., ATC'23; fgd.md §5-§6).

FGD places a pod where it makes the node's fragmentation F (see ``fragment_math``) shrink
the most, ``delta = F(before) - F(after)``, and on the device that does so. The typical
pods F is measured against are given (options, a file, a trace) or learned online from the
requests the policy observes, starting from a prior.

For a pod that takes one device (a share or all of it), every fitting device of every node
is tried at once. Nodes in equal states are scored once (``RowStates``), and a state's
score is kept between pods (``StateScores``): only states not seen before are scored.
Host CPU is read from the index; where it is untracked (UNLIMITED, as in the extender)
it never limits a shape.

Node scores are the paper's integers, ``floor(100 * sigmoid(delta / 1000))``. Two
refinements beat the paper's FGD on its own trace (docs/simulation.md): a node's devices
are ranked by the raw ``delta`` (the paper takes the lowest-index device reaching the best
integer score), and host-only pods, among nodes of equal score, go to the node with the
least free device capacity. Without both it replays the paper's FGD exactly. An option,
``host_strand``, also charges one-device placements the device capacity they leave the
node's host CPU unable to feed (``host_stranding``); off here, on in ``ss-lookahead``.
Finer *node* scores do worse: they separate nodes by the small fragments host CPU decides.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodAssignment, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState, choose_devices
from vgpu_extender.engine.columns import UNLIMITED
from vgpu_extender.engine.framework import ArgumentError, FloatVec, IntVec
from vgpu_extender.policies.fragment_math import (
    ClassStats,
    CompiledShapes,
    Devices,
    IntArr,
    device_fits,
    node_state_key,
    one_device_after,
    paper_score,
    taken,
)
from vgpu_extender.policies.host_stranding import cpu_per_milli, one_device_points
from vgpu_extender.policies.row_states import RowStates
from vgpu_extender.policies.state_scores import StateScores
from vgpu_extender.policies.typical_pods import ShapeCounter, TypicalPod, WeightedShape

#: The default ``host_pack``: half a score point.
HOST_PACK = 0.5


@dataclass(frozen=True, slots=True)
class FragmentationArgs:
    """``fragmentation``'s arguments. ``typical_pods``: (weight, shape) pairs, empty to
    learn them online; the rest as on ``Fragmentation``. ``quantize=True,
    raw_devices=False, host_pack=0`` (and ``host_strand=0``, the default) is the paper's FGD
    exactly."""

    typical_pods: tuple[WeightedShape, ...] = ()
    quantize: bool = True
    raw_devices: bool = True
    host_pack: float = HOST_PACK
    host_strand: float = 0.0

    def __post_init__(self) -> None:
        pods = self.typical_pods
        if not isinstance(pods, tuple) or not all(
            isinstance(p, tuple)
            and len(p) == 2
            and isinstance(p[0], int | float)
            and not isinstance(p[0], bool)
            and p[0] > 0
            and isinstance(p[1], TypicalPod)
            for p in pods
        ):
            raise ArgumentError(
                "typical_pods", f"must be a tuple of (weight > 0, TypicalPod), not {pods!r:.80}"
            )
        for name in ("quantize", "raw_devices"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(name, f"must be a bool, not {getattr(self, name)!r}")
        pack = self.host_pack
        if isinstance(pack, bool) or not isinstance(pack, int | float) or not 0 <= pack < 1:
            raise ArgumentError("host_pack", f"must be a number in [0, 1), not {pack!r}")
        strand = self.host_strand
        if isinstance(strand, bool) or not isinstance(strand, int | float) or not 0 <= strand < 1e6:
            # A finite weight: inf * a zero change would be no number at all.
            raise ArgumentError("host_strand", f"must be a number in [0, 1e6), not {strand!r}")


# --------------------------------------------------------------------------- the policy
@dataclass(slots=True)
class Fragmentation:
    """The FGD policy; typical pods fixed (``shapes``) or learned (``learner``)."""

    name: str = "fragmentation"
    shapes: tuple[WeightedShape, ...] = ()
    learner: ShapeCounter | None = None
    #: Score as the paper does, ``floor(100 * sigmoid(delta / 1000))``: changes below
    #: about 40 milli tie, and ties go to the candidate order. Raw ``delta`` separates
    #: nodes by the tiny fragments their host CPU decides, which spreads pods (worse).
    quantize: bool = True
    #: Rank a node's devices by the raw change, not the integer score. The node's host CPU
    #: is the same whichever device is picked, so full resolution there has no CPU bias,
    #: and it tells apart devices that the integer score lumps together.
    raw_devices: bool = True
    #: Host-only pods: weight (below one score point) of preferring the node with the least
    #: free device capacity, so their CPU strands as little of it as possible. 0: none.
    host_pack: float = HOST_PACK
    #: One-device pods: score points per 40 milli of device capacity a placement leaves
    #: the node's host CPU unable to feed (``host_stranding``). 0: none, as the paper.
    host_strand: float = 0.0
    _compiled: tuple[int, CompiledShapes | None] = field(default=(-1, None), repr=False)
    _states: RowStates = field(default_factory=RowStates, repr=False)
    #: The device order worked out while scoring the best node: (node state, request,
    #: typical pods version) -> key per device. The device choice that follows on that
    #: node (or any node in the same state) then costs nothing.
    _ranked: tuple[tuple[object, ...], list[float]] | None = field(default=None, repr=False)
    #: One-device pods' scores per node state, kept between pods: a node's FGD score
    #: depends on its own state alone, and between two pods only the chosen node's changes.
    _remembered: StateScores = field(default_factory=StateScores, repr=False)
    #: Whether a one-device pod's score of a node depends on the node's state alone (a
    #: policy that also reads the rest of the cluster sets it False).
    scores_by_state: ClassVar[bool] = True

    def compiled(self) -> CompiledShapes:
        version = self.learner.version if self.learner is not None else 0
        cached = self._compiled
        if cached[0] == version and cached[1] is not None:
            return cached[1]
        shapes = self.learner.distribution() if self.learner is not None else self.shapes
        built = CompiledShapes.of(shapes)
        self._compiled = (version, built)
        return built

    def observe(self, request: PodRequest) -> None:
        if self.learner is not None:
            self.learner.add(TypicalPod.of_request(request))

    def signature(self, request: PodRequest) -> Hashable | None:
        # Its device order follows the typical pods it learns as pods arrive, which no
        # row stamp covers: its part of a verdict is never remembered.
        return None

    # ----------------------------------------------------------------- node scores
    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec:
        if len(rows) == 0:
            return np.zeros(0, dtype=np.float64)
        first, inverse = self._states.group(index, rows)
        distinct = rows[first]
        container = one_share(request)
        if container is None or not self.scores_by_state:
            scores = self._score_distinct(
                index, request, distinct, Devices.of_rows(index, distinct)
            )
        else:
            self.compiled()  # its version is part of the key
            key = (self._states.generation, self._compiled[0], container, request.cpu_milli)

            def compute(at: IntVec) -> FloatVec:
                rows_at = distinct[at]
                return self._score_distinct(
                    index, request, rows_at, Devices.of_rows(index, rows_at)
                )

            scores = self._remembered.scores(key, self._states.ids(index)[distinct], compute)
        out: FloatVec = scores[inverse]
        return out

    def _settle(
        self,
        d: Devices,
        request: PodRequest,
        container: ContainerRequest,
        score: FloatVec,
        order: FloatVec,
    ) -> FloatVec:
        """Each node state's score, its best device's (``score``: per state and device,
        -inf where the share does not fit), host stranding charged; the best state's
        devices in ``order`` (highest first) are kept for the device choice that follows."""
        if self.host_strand:
            k = cpu_per_milli(self.compiled())
            score = score + one_device_points(d, container, request.cpu_milli, k, self.host_strand)
        best: FloatVec = np.max(score, axis=1)
        top = int(np.argmax(best))
        key = (*d.state_key(top), request.cpu_milli, container, self._compiled[0])
        self._ranked = (key, (-order[top]).tolist())
        out: FloatVec = np.where(np.isfinite(best), best, np.nan)
        return out

    def _score_distinct(
        self, index: ClusterIndex, request: PodRequest, rows: IntVec, d: Devices
    ) -> FloatVec:
        shapes = self.compiled()
        stats = ClassStats.of(d, shapes)
        before = stats.fragmentation(shapes, d.cpu)
        cpu_after = _cpu_after(d.cpu, request.cpu_milli)
        containers = request.device_containers
        if not containers:
            # Host-only pods: where their CPU strands the least device capacity.
            after = stats.fragmentation(shapes, cpu_after)
            return self._combine(before - after, stats.total, host_only=True)
        elif len(containers) == 1 and containers[0].count == 1:
            # Every device that fits is a real choice: score the node by its best one.
            per_device = one_device_after(d, shapes, stats, containers[0], cpu_after)
            delta = np.where(np.isnan(per_device), -np.inf, before[:, None] - per_device)
            score = self._combine(delta)
            return self._settle(
                d, request, containers[0], score, delta if self.raw_devices else score
            )
        elif len(containers) == 1:
            after = self._first_devices_after(d, shapes, containers[0], cpu_after)
        else:
            after = self._exact_after(index, request, rows, d, shapes, cpu_after)
        return self._combine(before - after)

    def _combine(
        self, delta: FloatVec, free: IntArr | None = None, *, host_only: bool = False
    ) -> FloatVec:
        """The score of a fragmentation change; for host-only pods, ties within one score
        point go to the node with the least free device capacity ``free``."""
        score: FloatVec = paper_score(delta) if self.quantize else delta
        if host_only and self.host_pack and free is not None and len(free):
            score = score + self.host_pack * (1.0 - free / (float(free.max()) + 1.0))
        return score

    def _first_devices_after(
        self, d: Devices, shapes: CompiledShapes, container: ContainerRequest, cpu_after: IntArr
    ) -> FloatVec:
        """F after ``container`` takes the lowest-index devices that fit (several whole
        devices: fully free ones of a node are alike, so which cannot matter)."""
        fit = device_fits(container, d.mem_free, d.cores_free, d.slots_free, d, None)
        chosen = fit & (np.cumsum(fit, axis=1) <= container.count)
        after = ClassStats.of(d, shapes, taken(container, d, chosen))
        return after.fragmentation(shapes, cpu_after)

    def _exact_after(
        self,
        index: ClusterIndex,
        request: PodRequest,
        rows: IntVec,
        d: Devices,
        shapes: CompiledShapes,
        cpu_after: IntArr,
    ) -> FloatVec:
        """Several device containers: the engine's exact choice per node (rare pods)."""
        mem, cores, slots = d.mem_free.copy(), d.cores_free.copy(), d.slots_free.copy()
        ok = np.ones(len(rows), dtype=np.bool_)
        for i, row in enumerate(rows):
            chosen = choose_devices(index, request, index.name_of(int(row)), self.rank_devices)
            if not isinstance(chosen, PodAssignment):
                ok[i] = False
                continue
            for uuid, use in chosen.footprint().items():
                where = index.locate(uuid)
                if where is None:
                    continue
                mem[i, where[1]] -= use.memory_mib
                cores[i, where[1]] -= use.cores
                slots[i, where[1]] -= use.slots
        after = ClassStats.of(d, shapes, (mem, cores, slots)).fragmentation(shapes, cpu_after)
        out: FloatVec = np.where(ok, after, np.nan)
        return out

    # ----------------------------------------------------------------- device ranking
    def rank_devices(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]:
        """Candidates by the fragmentation their share leaves on the node, least first
        (ties: lowest device index); without ``raw_devices``, by the integer score."""
        if len(candidates) <= 1:
            return list(candidates)
        shapes = self.compiled()
        ranked = self._ranked
        if ranked is not None and ranked[0] == (
            *node_state_key(state),
            state.pod_cpu_milli,
            container,
            self._compiled[0],
        ):
            known = ranked[1]
            return sorted(candidates, key=lambda s: (known[s], state.devices[s].index))
        d = Devices.of_state(state)
        stats = ClassStats.of(d, shapes)
        cpu_after = _cpu_after(d.cpu, state.pod_cpu_milli)
        after = one_device_after(d, shapes, stats, container, cpu_after)
        delta = stats.fragmentation(shapes, d.cpu)[:, None] - after
        score = delta if self.raw_devices else self._combine(delta)
        key = np.where(np.isnan(score[0]), np.inf, -score[0]).tolist()
        return sorted(candidates, key=lambda s: (key[s], state.devices[s].index))


def _cpu_after(cpu: IntArr, request_cpu: int) -> IntArr:
    out: IntArr = np.where(cpu >= UNLIMITED, cpu, cpu - request_cpu)
    return out


def one_share(request: PodRequest) -> ContainerRequest | None:
    """The container of a pod that takes one device (a share or a whole one), else None:
    the pods whose every fitting device is a choice of its own."""
    containers = request.device_containers
    if len(containers) == 1 and containers[0].count == 1:
        return containers[0]
    return None


def one_device_delta(
    d: Devices, shapes: CompiledShapes, container: ContainerRequest, cpu_milli: int
) -> FloatVec:
    """FGD's change per (node state, device) for one share of ``container`` (-inf: it
    does not fit there)."""
    stats = ClassStats.of(d, shapes)
    per_device = one_device_after(d, shapes, stats, container, _cpu_after(d.cpu, cpu_milli))
    out: FloatVec = np.where(
        np.isnan(per_device), -np.inf, stats.fragmentation(shapes, d.cpu)[:, None] - per_device
    )
    return out


def build_fragmentation(args: FragmentationArgs) -> Fragmentation:
    """The policy from its arguments: fixed typical pods when given, else learned online."""
    fixed = tuple(args.typical_pods)
    return Fragmentation(
        shapes=fixed,
        learner=None if fixed else ShapeCounter(),
        quantize=args.quantize,
        raw_devices=args.raw_devices,
        host_pack=args.host_pack,
        host_strand=args.host_strand,
    )
