"""Fit + score latency of the placement engine, next to the plain reference loop.

For 100, 1,000, 5,000 and 10,000 nodes of 8 GPUs each, half allocated (half of the nodes, chosen
at random, carry allocations on every GPU: a mix of whole-card and shared pods; the
other half are idle), it times one scheduling decision's engine work:

- ``filter``: which of all nodes fit, with a reason for every other node;
- ``score``: the node policy's scores of the feasible nodes, scaled to 0..10;
- ``place`` (``place_median_ms``, apart): bind's device choice on one feasible node.

The engine remembers, per request shape, whether each candidate of a list fits
(``engine/fit_cache.py``) and why a node rejected it (``engine/rejection_cache.py``),
each until that node changes: ``median_ms`` is the steady state of a busy cluster,
where pod after pod of a shape meets mostly the same nodes, nothing changed between two
decisions; ``changed_median_ms`` has one feasible node changed before each decision, as
the previous pod's bind changes the node it lands on (the time includes that change);
``cold_median_ms`` forgets every remembered verdict and score before each decision,
so every candidate is judged and scored and every rejected node explained afresh (the
first pod of a new shape).

The Ascend cases run the same on nodes of eight 910B3 NPUs in two HCCS rings of four
(NetworkID 0 and 1, as HAMi's plugin registers them), half of the nodes busy with template
vNPUs and whole cards: a template vNPU, a 4-chip job (one ring) and an 8-chip job, under
the 910B3's share model and its ring rule.

Each repetition gets a freshly decoded candidate list, as a JSON request body would
give it. The reference is ``engine/reference.py``'s plain loop plus a plain scoring
loop on the same data.

Goals: at 5,000 nodes a median of at most 0.5 ms and 20x the reference; at 10,000 nodes
(twice kube-scheduler's largest tested cluster) a median of at most 1.0 ms; both cases.

Run: ``python -m benchmarks.engine_fit [--json PATH] [--quick] [--nodes N ...]``.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (
    add_nodes_option,
    argument_parser,
    measure,
    median,
    percentile,
    print_table,
    write_json,
)
from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    NodeInventory,
    PodAssignment,
    PodRequest,
)
from vgpu_extender.engine import ClusterIndex, to_extender_scores
from vgpu_extender.engine.framework import Planner
from vgpu_extender.engine.reference import free_capacity, reference_fit
from vgpu_extender.policies import default_profile
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendChipVendor
from vgpu_extender.vendors.ascend.inventory_codec import MODE_VNPU, network_id

SIZES = (100, 1_000, 5_000, 10_000)
#: ``--quick`` (a smoke run): the small sizes only.
QUICK_SIZES = (100, 1_000)
GPUS = 8
MEMORY_MIB = 81_920
SPLIT = 10
#: Nodes -> (median ms at most, speedup over the reference at least).
GOALS = {5_000: (0.5, 20.0), 10_000: (1.0, 20.0)}

CASES: dict[str, PodRequest] = {
    # nvidia.com/gpu: 1, gpumem: 10240, gpucores: 20
    "1-gpu-shared": PodRequest(
        uid="bench-shared",
        containers=(ContainerRequest("main", count=1, memory_mib=10_240, cores=20),),
    ),
    # nvidia.com/gpu: 8 alone: eight whole cards (100 % memory, 100 cores each)
    "8-gpu-whole": PodRequest(
        uid="bench-whole",
        containers=(ContainerRequest("main", count=8, memory_percent=100, cores=100),),
    ),
}


#: The Ascend chip of the NPU cases, and its request shapes (memory per NPU, MiB).
ASCEND = AscendChipVendor(next(c for c in DEFAULT_CHIPS if c.common_word == "Ascend910B3"))
NPU_WORD = ASCEND.name
NPU_MEMORY = 65_536
ASCEND_CASES: dict[str, PodRequest] = {
    # huawei.com/Ascend910B3: 1, -memory: 16384 (template vir05_1c_16g)
    "1-npu-vnpu": PodRequest(
        uid="bench-vnpu",
        containers=(ContainerRequest("main", count=1, memory_mib=16_384, vendor=NPU_WORD),),
    ),
    # huawei.com/Ascend910B3: 4 whole cards: one ring
    "4-npu-whole": PodRequest(
        uid="bench-ring",
        containers=(ContainerRequest("main", count=4, memory_mib=NPU_MEMORY, vendor=NPU_WORD),),
    ),
    # huawei.com/Ascend910B3: 8 whole cards: the node
    "8-npu-whole": PodRequest(
        uid="bench-npus",
        containers=(ContainerRequest("main", count=8, memory_mib=NPU_MEMORY, vendor=NPU_WORD),),
    ),
}


@dataclass
class Cluster:
    index: ClusterIndex
    names: list[str]


def build_cluster(nodes: int, *, seed: int = 7) -> Cluster:
    """``nodes`` nodes of 8 GPUs; a random half of them carry allocations on every GPU."""
    rng = random.Random(seed)
    index = ClusterIndex()
    names = [f"gpu-node-{i:05d}" for i in range(nodes)]
    for name in names:
        devices = tuple(
            Device(
                uuid=f"GPU-{name}-{g}",
                index=g,
                count=SPLIT,
                memory_mib=MEMORY_MIB,
                cores=100,
                type="NVIDIA-A100-SXM4-80GB",
                numa=g // 4,
            )
            for g in range(GPUS)
        )
        index.upsert_node(NodeInventory(name=name, devices=devices))
    busy = rng.sample(names, nodes // 2)
    pod = 0
    for name in busy:
        for g in range(GPUS):
            uuid = f"GPU-{name}-{g}"
            if rng.random() < 1 / 3:
                shares = [(MEMORY_MIB, 100)]
            else:
                shares = [
                    (rng.choice((4_096, 8_192, 16_384)), rng.choice((10, 20, 30)))
                    for _ in range(rng.randint(1, 3))
                ]
            for memory, cores in shares:
                grant = DeviceGrant(uuid, memory, cores)
                index.apply(f"pod-{pod}", PodAssignment(name, ((grant,),)))
                pod += 1
    return Cluster(index, names)


def build_ascend_cluster(nodes: int, *, seed: int = 7) -> Cluster:
    """``nodes`` nodes of eight 910B3 NPUs (two rings); a random half of them carry
    allocations on every NPU: template vNPUs (16 or 32 GiB) or a whole card."""
    rng = random.Random(seed)
    index = ClusterIndex(share=ASCEND.share)
    names = [f"npu-node-{i:05d}" for i in range(nodes)]
    slots = ASCEND.chip.slots
    for name in names:
        devices = tuple(
            Device(
                uuid=f"NPU-{name}-{n}",
                index=n,
                count=slots,
                memory_mib=NPU_MEMORY,
                cores=ASCEND.chip.ai_core,
                type=NPU_WORD,
                mode=MODE_VNPU,
                vendor=NPU_WORD,
                custom_info=(("NetworkID", network_id(NPU_WORD, n) or 0),),
            )
            for n in range(GPUS)
        )
        index.upsert_node(NodeInventory(name=name, devices=devices))
    pod = 0
    for name in rng.sample(names, nodes // 2):
        for n in range(GPUS):
            uuid = f"NPU-{name}-{n}"
            if rng.random() < 1 / 3:
                shares = [NPU_MEMORY]
            else:
                shares = [rng.choice((16_384, 32_768)) for _ in range(rng.randint(1, 2))]
            for memory in shares:
                grant = DeviceGrant(uuid, memory, 0, NPU_WORD)
                index.apply(f"pod-{pod}", PodAssignment(name, ((grant,),)))
                pod += 1
    return Cluster(index, names)


def reference_decision(index: ClusterIndex, request: PodRequest, names: Sequence[str]) -> list[int]:
    """The plain loop: reference fit, then HAMi's node score node by node, scaled to 0..10."""
    feasible = reference_fit(index, request, names)
    raw: list[float] = []
    for name in feasible:
        devices = index.inventory(name).devices
        free = free_capacity(index, name)
        used_slots = sum(d.count - free[d.uuid][2] for d in devices)
        used_cores = sum(d.cores - free[d.uuid][1] for d in devices)
        used_mem = sum(d.memory_mib - free[d.uuid][0] for d in devices)
        raw.append(
            10.0
            * (
                used_slots / sum(d.count for d in devices)
                + used_cores / sum(d.cores for d in devices)
                + used_mem / sum(d.memory_mib for d in devices)
            )
        )
    if not raw:
        return []
    lo, hi = min(raw), max(raw)
    if hi <= lo:
        return [10] * len(raw)
    return [round((r - lo) * 10 / (hi - lo)) for r in raw]


def run(sizes: Sequence[int], *, quick: bool) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for build, cases in ((build_cluster, CASES), (build_ascend_cluster, ASCEND_CASES)):
        for nodes in sizes:
            cluster = build(nodes)
            body = json.dumps(cluster.names)
            # Fresh string objects per repetition, as each request body decodes anew.
            lists = [json.loads(body) for _ in range(8)]
            for case, request in cases.items():
                results.append(time_case(case, cluster, request, lists, quick=quick))
    return results


def time_case(
    case: str, cluster: Cluster, request: PodRequest, lists: list[list[str]], *, quick: bool
) -> dict[str, Any]:
    planner = Planner(cluster.index, default_profile())

    def decide(i: int) -> tuple[int, int]:
        result = planner.filter(request, lists[i % len(lists)])
        scores = to_extender_scores(planner.scores(request, result.rows))
        return len(scores), len(result.rejections)

    def decide_cold(i: int) -> tuple[int, int]:
        cluster.index.rejection_cache.clear()
        cluster.index.fit_cache.clear()
        cluster.index.row_vectors.clear()
        return decide(i)

    feasible_names = planner.filter(request, lists[0]).feasible

    def decide_changed(i: int) -> tuple[int, int]:
        # Cordoning a node's devices as they are moves its row's stamp and nothing else.
        name = feasible_names[i % len(feasible_names)]
        cluster.index.set_cordoned(name, cluster.index.inventory(name).cordoned)
        return decide(i)

    def place(i: int) -> object:
        return planner.place(request, feasible_names[i % len(feasible_names)])

    def reference(i: int) -> list[int]:
        return reference_decision(cluster.index, request, lists[i % len(lists)])

    feasible, rejected = decide(0)
    if planner.filter(request, lists[0]).feasible != reference_fit(
        cluster.index, request, lists[0]
    ):
        raise AssertionError(f"{case}: the engine and the reference disagree on what fits")
    engine = measure(decide, repeat=50 if quick else 400)
    changed = measure(decide_changed, repeat=50 if quick else 400)
    cold = measure(decide_cold, repeat=50 if quick else 400)
    placed = measure(place, repeat=50 if quick else 400)
    plain = measure(reference, repeat=3 if quick else 15, warmup=1, budget_s=10 if quick else 60)
    return {
        "case": case,
        "nodes": len(cluster.names),
        "median_ms": round(median(engine), 4),
        "p99_ms": round(percentile(engine, 99), 4),
        "changed_median_ms": round(median(changed), 4),
        "cold_median_ms": round(median(cold), 4),
        "cold_p99_ms": round(percentile(cold, 99), 4),
        "place_median_ms": round(median(placed), 4),
        "reference_median_ms": round(median(plain), 3),
        "speedup": round(median(plain) / median(engine), 1),
        "feasible": feasible,
        "rejected": rejected,
        "samples": len(engine),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argument_parser(__doc__.splitlines()[0])
    add_nodes_option(parser, SIZES)
    parser.set_defaults(nodes=None)
    args = parser.parse_args(argv)
    results = run(args.nodes or (QUICK_SIZES if args.quick else SIZES), quick=args.quick)
    print_table(
        f"engine fit + score, {GPUS} GPUs (or NPUs) per node, half allocated",
        (
            "case",
            "nodes",
            "feasible",
            "rejected",
            "median ms",
            "p99 ms",
            "changed median ms",
            "cold median ms",
            "place median ms",
            "reference ms",
            "speedup",
        ),
        [
            (
                r["case"],
                r["nodes"],
                r["feasible"],
                r["rejected"],
                r["median_ms"],
                r["p99_ms"],
                r["changed_median_ms"],
                r["cold_median_ms"],
                r["place_median_ms"],
                r["reference_median_ms"],
                f"{r['speedup']}x",
            )
            for r in results
        ],
    )
    for r in results:
        if r["nodes"] in GOALS:
            most_ms, speedup = GOALS[r["nodes"]]
            met = r["median_ms"] <= most_ms and r["speedup"] >= speedup
            changed = r["changed_median_ms"] <= most_ms
            cold = r["cold_median_ms"] <= most_ms
            print(
                f"goal at {r['nodes']} nodes, {r['case']}: median <= {most_ms} ms and "
                f">= {speedup:.0f}x the reference: {'met' if met else 'NOT met'} "
                f"(one node changed: {'met' if changed else 'NOT met'}, "
                f"cold: {'met' if cold else 'NOT met'})"
            )
    write_json(args.json, "engine_fit", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
