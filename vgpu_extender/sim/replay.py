"""Replay a trace through the engine and policies the extender serves (fgd.md §10).

Pods arrive one at a time and never leave. Each goes through ``Planner.best``: the engine's
fit (GPU count, share, model, and host CPU and memory as NodeResourcesFit applies them),
then the policy's node scores, then its device choice. Candidates are listed by tie-break
rank and the planner keeps the first of equal scores, so ties go to the smallest rank as in
the paper. A pod that fits nowhere is dropped but counts as arrived.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import Planner, PluginSpec, Profile, ProfileConfig, Registry
from vgpu_extender.policies import BUILTIN
from vgpu_extender.policies.fragmentation import FragmentationArgs, build_fragmentation
from vgpu_extender.policies.typical_pods import TypicalPod, WeightedShape, top_shapes
from vgpu_extender.sim import arrivals as arrival_files
from vgpu_extender.sim.binning import bins
from vgpu_extender.sim.mapping import node_inventory, pod_request, typical_pod
from vgpu_extender.sim.trace import (
    GPU_MILLI,
    TraceError,
    TraceNode,
    TracePod,
    read_nodes,
    read_pods,
    trace_name,
)

#: Policies only the simulator offers: FGD exactly as the paper ran it (to check the
#: simulator against the published runs), and FGD scored by the raw change in milli.
SIM_POLICIES: Registry = {
    "fgd-paper": PluginSpec(
        FragmentationArgs,
        lambda args: build_fragmentation(
            replace(args, raw_devices=False, host_pack=0.0, host_strand=0.0)
        ),
    ),
    "fgd-raw": PluginSpec(
        FragmentationArgs,
        lambda args: build_fragmentation(replace(args, quantize=False, host_pack=0.0)),
    ),
}
#: Where typical pods come from: the trace (the paper's 95 % rule) or learned online.
TYPICAL_SOURCES = ("trace", "learn")


@dataclass(frozen=True, slots=True)
class Workload:
    """One trace and seed: the cluster, the pod list, the arrival order and the ranks."""

    trace: str
    seed: int
    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]
    order: tuple[int, ...]
    ranks: Mapping[str, int]

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def nodes_by_rank(self) -> list[TraceNode]:
        return sorted(self.nodes, key=lambda n: (self.ranks.get(n.name, len(self.ranks)), n.name))

    def typical_pods(self) -> tuple[WeightedShape, ...]:
        """The paper's typical pods: shapes of the original trace covering 95 % of it."""
        counts: dict[TypicalPod, float] = {}
        for pod in self.pods:
            shape = typical_pod(pod)
            counts[shape] = counts.get(shape, 0.0) + 1.0
        return top_shapes(counts)


def load_workload(
    nodes_csv: Path,
    pods_csv: Path,
    *,
    seed: int,
    arrivals_csv: Path | None = None,
    ranks_csv: Path | None = None,
    limit: int | None = None,
    trace: str | None = None,
) -> Workload:
    """Read the files; without published orders or ranks, draw them from ``seed``."""
    nodes = tuple(read_nodes(nodes_csv))
    pods = tuple(read_pods(pods_csv))
    name = trace or trace_name(pods_csv)
    capacity = sum(n.gpus for n in nodes) * GPU_MILLI
    if arrivals_csv is not None:
        order = arrival_files.read_arrivals(arrivals_csv, name, seed)
    else:
        order = arrival_files.drawn_arrivals(pods, seed, capacity)
    bad = next((row for row in order if not 0 <= row < len(pods)), None)
    if bad is not None:
        raise TraceError(f"arrival order names row {bad}, but {pods_csv} has {len(pods)} pods")
    if ranks_csv is not None:
        ranks = arrival_files.read_ranks(ranks_csv, name, seed)
    else:
        ranks = arrival_files.drawn_ranks([n.name for n in nodes], seed)
    if limit is not None:
        order = order[:limit]
    return Workload(name, seed, nodes, pods, tuple(order), ranks)


@dataclass(slots=True)
class ReplayResult:
    """Per-arrival counters of one replay, and its totals."""

    policy: str
    gpus: int
    arrived: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    placed: int = 0
    failed: int = 0
    seconds: float = 0.0

    def curve(self) -> dict[int, float | None]:
        return bins(self.arrived, self.used, self.gpus)


def make_planner(
    workload: Workload, policy: str, *, typical: str | Sequence[WeightedShape] = "trace"
) -> Planner:
    """An index of the trace's nodes, and a planner that uses ``policy`` for everything."""
    index = ClusterIndex(initial_nodes=max(64, len(workload.nodes)))
    for node in workload.nodes_by_rank():
        index.upsert_node(node_inventory(node))
    if isinstance(typical, str):
        if typical not in TYPICAL_SOURCES:
            raise ValueError(f"typical pods: {typical!r} is neither of {TYPICAL_SOURCES}")
        shapes = workload.typical_pods() if typical == "trace" else ()
    else:
        shapes = tuple(typical)
    registry = {**BUILTIN, **SIM_POLICIES}
    # Every FGD variant plans for the same typical pods.
    args = {
        name: spec.args(typical_pods=shapes)
        for name, spec in registry.items()
        if isinstance(spec.args, type) and issubclass(spec.args, FragmentationArgs)
    }
    plain = Profile(registry, ProfileConfig(node_score=policy, device_rank="", fallback_score=""))
    # The policy ranks devices where it can; one without a device preference (label-priority)
    # leaves them in index order.
    config = ProfileConfig(
        node_score=policy,
        device_rank=policy if policy in plain.device_rankers else "",
        fallback_score="",
        score_unmanaged=True,
    )
    return Planner(index, Profile(registry, config, args))


def replay(
    workload: Workload,
    policy: str,
    *,
    typical: str | Sequence[WeightedShape] = "trace",
    on_arrival: Callable[[int], None] | None = None,
    planner: Planner | None = None,
) -> ReplayResult:
    """Place every arrival in order; the counters after each one make the curves.
    ``planner`` (from ``make_planner``) lets a caller look at the cluster afterwards."""
    started = time.perf_counter()
    if planner is None:
        planner = make_planner(workload, policy, typical=typical)
    names = [n.name for n in workload.nodes_by_rank()]
    result = ReplayResult(policy, workload.gpus)
    arrived = used = 0
    for position, row in enumerate(workload.order):
        pod = workload.pods[row]
        request = pod_request(pod, uid=f"{position}-{pod.name}")
        planner.observe(request)  # the arriving workload is what a learning policy learns
        arrived += pod.gpu_request
        chosen = planner.best(request, names, explain=False)
        if isinstance(chosen, tuple):
            _node, assignment = chosen
            planner.index.apply(
                request.uid,
                assignment,
                cpu_milli=request.cpu_milli,
                memory_mib=request.host_memory_mib,
            )
            used += pod.gpu_request
            result.placed += 1
        else:
            result.failed += 1
        result.arrived.append(arrived)
        result.used.append(used)
        if on_arrival is not None:
            on_arrival(position + 1)
    result.seconds = time.perf_counter() - started
    return result
