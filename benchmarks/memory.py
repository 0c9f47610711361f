"""Resident memory with 5,000 and 10,000 nodes x 8 GPUs (10 allocations per node:
50,000 and 100,000) loaded, and how long the runtime takes to start on them.

Each case runs in a fresh process, so the numbers are that process's own:

- ``imports``: the extender's modules imported, nothing loaded (the floor);
- ``engine``: the in-memory index (``ClusterIndex``) holding the cluster and the pods;
- ``runtime``: the extender's runtime started on a SQLite store holding the same
  cluster, with the index rebuilt from the store, as ``serve`` does on start;
- ``runtime-scraped``: ``runtime``, then HAMi's allocation gauges written once, as the
  first ``/metrics`` scrape leaves them (every node's lines kept for the next), with
  ``gauges_mb`` the text's size;
- ``runtime-postgresql``: the same as ``runtime`` on PostgreSQL (a database of its own on the server
  ``VGPU_BENCH_POSTGRES_URL``, else ``VGPU_TEST_POSTGRES_URL``, else the test server;
  left out when none answers).

The runtime cases report ``start_s``: building and starting the runtime (the store
opened and migrated, every node and allocation read, the index rebuilt). Goals: at most
500 MB at 5,000 nodes and 1 GB at 10,000; a start at 10,000 nodes on PostgreSQL in at
most 10 s.

Each case also times one full garbage collection with everything loaded
(``full_gc_ms``, over ``tracked_objects``: every thread waits that long) and one after
the live objects are frozen as ``serve`` freezes them (``full_gc_frozen_ms``, over
``tracked_after_freeze``).

Run: ``python -m benchmarks.memory [--json PATH] [--quick] [--nodes N ...]``
(``--quick``: 500 nodes, SQLite only).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_nodes_option, argument_parser, print_table, write_json
from benchmarks.stores import ThrowawayDatabase, postgres_server, write_cluster

GPUS = 8
PODS_PER_NODE = 10
SIZES = (5_000, 10_000)
#: Nodes -> resident memory at most (MB).
GOAL_MB = {5_000: 500.0, 10_000: 1_000.0}
GOAL_START_S = 10.0


def cluster(nodes: int) -> tuple[list[Any], list[tuple[str, Any]]]:
    """Inventories and (pod uid, assignment) pairs: 10 pods per node, one GPU share each."""
    from vgpu_extender.domain import Device, DeviceGrant, NodeInventory, PodAssignment

    inventories = []
    pods = []
    for n in range(nodes):
        name = f"gpu-node-{n:05d}"
        devices = tuple(
            Device(
                f"GPU-{n:05d}-{i}",
                index=i,
                count=10,
                memory_mib=81920,
                cores=100,
                type="NVIDIA-A100-SXM4-80GB",
                numa=i // 4,
            )
            for i in range(GPUS)
        )
        inventories.append(
            NodeInventory(name, devices, labels={"priority.lixueduan.com": str(n % 50)})
        )
        for p in range(PODS_PER_NODE):
            grant = DeviceGrant(devices[p % GPUS].uuid, 4096, 10)
            pods.append((f"pod-{n:05d}-{p}", PodAssignment(name, ((grant,),))))
    return inventories, pods


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB, from /proc."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return (
        int(fields["VmRSS"].split()[0]) / 1024.0,
        int(fields["VmHWM"].split()[0]) / 1024.0,
    )


def populate_store(url: str, nodes: int) -> None:
    """Write the cluster into a fresh store, every pod bound."""
    inventories, pods = cluster(nodes)
    write_cluster(url, inventories, pods)


def child(case: str, nodes: int, url: str) -> dict[str, Any]:
    """One case, measured in this (fresh) process."""
    import vgpu_extender.api.app  # noqa: F401  (the server's imports are part of the floor)
    from vgpu_extender.engine import ClusterIndex

    loaded: dict[str, float] = {"nodes": 0, "allocations": 0}
    keep: object = None
    if case == "engine":
        inventories, pods = cluster(nodes)
        index = ClusterIndex()
        for inventory in inventories:
            index.upsert_node(inventory)
        for uid, assignment in pods:
            index.apply(uid, assignment)
        del inventories, pods
        loaded = {"nodes": len(index), "allocations": sum(1 for _ in index.allocations())}
        keep = index
    elif case.startswith("runtime"):
        from vgpu_extender.services.runtime import Runtime
        from vgpu_extender.settings import Settings

        started, cpu_started = time.perf_counter(), time.process_time()
        runtime = Runtime.build(Settings(database_url=url, kube_mode="off"), kube=None)
        runtime.start()
        start_s = time.perf_counter() - started
        start_cpu_s = time.process_time() - cpu_started
        index = runtime.cluster.index
        loaded = {
            "nodes": len(index),
            "allocations": sum(1 for _ in index.allocations()),
            "start_s": round(start_s, 2),
            # This process's CPU time for it (the database server's is not counted):
            # steadier than the wall time on a busy machine.
            "start_cpu_s": round(start_cpu_s, 2),
        }
        keep = runtime
        if case == "runtime-scraped":
            from vgpu_extender.metrics import AllocationGauges
            from vgpu_extender.services.gauge_rows import IndexGaugeRows
            from vgpu_extender.services.store_health import StoreHealth

            gauges = AllocationGauges(
                IndexGaugeRows(runtime.cluster, runtime.sessions, StoreHealth(runtime.engine))
            )
            loaded["gauges_mb"] = round(sum(map(len, gauges.render())) / 1e6, 1)
            keep = (runtime, gauges)
    gc.collect()
    current, peak = rss_mb()
    pauses = full_collection_pauses()
    del keep
    return {
        "case": case,
        **loaded,
        "rss_mb": round(current, 1),
        "peak_rss_mb": round(peak, 1),
        **pauses,
    }


def full_collection_pauses() -> dict[str, Any]:
    """How long a full garbage collection stops the process with everything loaded,
    and how long once the live objects are frozen as ``serve`` freezes them."""
    from vgpu_extender.api.app import freeze_startup_objects

    tracked = len(gc.get_objects())
    started = time.perf_counter()
    gc.collect()
    full_ms = 1000.0 * (time.perf_counter() - started)
    freeze_startup_objects()
    # What a full collection still walks once the rest sits in the permanent generation.
    still_tracked = len(gc.get_objects())
    started = time.perf_counter()
    gc.collect()
    frozen_ms = 1000.0 * (time.perf_counter() - started)
    gc.unfreeze()
    return {
        "tracked_objects": tracked,
        "tracked_after_freeze": still_tracked,
        "full_gc_ms": round(full_ms, 1),
        "full_gc_frozen_ms": round(frozen_ms, 2),
    }


def run(nodes: int, *, postgresql: bool) -> list[dict[str, Any]]:
    results = []
    with TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'memory.db'}"
        populate_store(url, nodes)
        cases = [("imports", url), ("engine", url), ("runtime", url), ("runtime-scraped", url)]
        server = postgres_server("runtime on PostgreSQL") if postgresql else None
        database = ThrowawayDatabase(server) if server is not None else None
        try:
            if database is not None:
                populate_store(database.url, nodes)
                cases.append(("runtime-postgresql", database.url))
            for case, case_url in cases:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", case, str(nodes), case_url],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                result = json.loads(out.strip().splitlines()[-1])
                results.append({"nodes": nodes, "gpus": nodes * GPUS, **result})
        finally:
            if database is not None:
                database.drop()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--child"]:
        _, case, nodes, url = args_list
        print(json.dumps(child(case, int(nodes), url)))
        return 0
    parser = argument_parser(__doc__.splitlines()[0] if __doc__ else "memory")
    add_nodes_option(parser, SIZES)
    parser.set_defaults(nodes=None)
    args = parser.parse_args(args_list)
    sizes = args.nodes or ([500] if args.quick else list(SIZES))
    results = [row for nodes in sizes for row in run(nodes, postgresql=not args.quick)]
    print_table(
        f"Resident memory ({GPUS} GPUs and {PODS_PER_NODE} pods per node)",
        [
            "case",
            "nodes",
            "allocations",
            "rss MB",
            "peak MB",
            "start s",
            "start CPU s",
            "objects",
            "full GC ms",
            "frozen ms",
            "gauges MB",
        ],
        [
            [
                r["case"],
                r["nodes"],
                r["allocations"],
                r["rss_mb"],
                r["peak_rss_mb"],
                r.get("start_s", ""),
                r.get("start_cpu_s", ""),
                r["tracked_objects"],
                r["full_gc_ms"],
                r["full_gc_frozen_ms"],
                r.get("gauges_mb", ""),
            ]
            for r in results
        ],
    )
    for r in results:
        if r["nodes"] in GOAL_MB and r["case"].startswith("runtime"):
            most = GOAL_MB[r["nodes"]]
            verdict = "met" if r["peak_rss_mb"] <= most else "NOT met"
            line = f"goal at {r['nodes']} nodes, {r['case']}: peak RSS <= {most:.0f} MB: {verdict}"
            if r["case"] == "runtime-postgresql" and r["nodes"] == max(GOAL_MB):
                started = "met" if r["start_s"] <= GOAL_START_S else "NOT met"
                line += f"; start <= {GOAL_START_S:.0f} s: {started} ({r['start_s']} s)"
            print(line)
    write_json(args.json, "memory", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
