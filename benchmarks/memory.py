"""Resident memory with 5,000 nodes x 8 GPUs and 50,000 allocations loaded.

Each case runs in a fresh process, so the numbers are that process's own:

- ``imports``: the extender's modules imported, nothing loaded (the floor);
- ``engine``: the in-memory index (``ClusterIndex``) holding the cluster and the pods;
- ``runtime``: the extender's runtime started on a SQLite store holding the same
  cluster, with the index rebuilt from the store, as ``serve`` does on start.

Each case also times one full garbage collection with everything loaded
(``full_gc_ms``, over ``tracked_objects``: every thread waits that long) and one after
the live objects are frozen as ``serve`` freezes them (``full_gc_frozen_ms``).

Run: ``python -m benchmarks.memory [--json PATH] [--quick]`` (``--quick``: 500 nodes).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import parse_args, print_table, write_json

GPUS = 8
PODS_PER_NODE = 10
GOAL_MB = 500.0


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
    """Write the cluster into a fresh store: nodes through the repository, the 50,000
    allocation rows in one bulk insert (the repository's per-pod locking is not what
    this benchmark measures)."""
    from sqlalchemy import insert

    from vgpu_extender import store
    from vgpu_extender.store.models import AllocationModel

    inventories, pods = cluster(nodes)
    engine = store.make_engine(url)
    store.migrate(engine)
    sessions = store.session_factory(engine)
    now = datetime.now(UTC)
    with sessions.begin() as session:
        for inventory in inventories:
            store.upsert_node(session, inventory=inventory, source="file", now=now)
    rows = [
        {
            "pod_uid": uid,
            "namespace": "default",
            "pod_name": uid,
            "node": assignment.node,
            "device_uuid": grant.uuid,
            "vendor": grant.vendor,
            "container_index": 0,
            "init": False,
            "memory_mib": grant.memory_mib,
            "cores": grant.cores,
            "state": "bound",
            "created_at": now,
            "updated_at": now,
            "bound_at": now,
            "released_at": None,
        }
        for uid, assignment in pods
        for grant in assignment.containers[0]
    ]
    with sessions.begin() as session:
        session.execute(insert(AllocationModel), rows)
    engine.dispose()


def child(case: str, nodes: int, url: str) -> dict[str, Any]:
    """One case, measured in this (fresh) process."""
    import vgpu_extender.api.app  # noqa: F401  (the server's imports are part of the floor)
    from vgpu_extender.engine import ClusterIndex

    loaded = {"nodes": 0, "allocations": 0}
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
    elif case == "runtime":
        from vgpu_extender.services.runtime import Runtime
        from vgpu_extender.settings import Settings

        runtime = Runtime.build(Settings(database_url=url, kube_mode="off"), kube=None)
        runtime.start()
        index = runtime.cluster.index
        loaded = {"nodes": len(index), "allocations": sum(1 for _ in index.allocations())}
        keep = runtime
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
    started = time.perf_counter()
    gc.collect()
    frozen_ms = 1000.0 * (time.perf_counter() - started)
    gc.unfreeze()
    return {
        "tracked_objects": tracked,
        "full_gc_ms": round(full_ms, 1),
        "full_gc_frozen_ms": round(frozen_ms, 2),
    }


def run(nodes: int) -> list[dict[str, Any]]:
    results = []
    with TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'memory.db'}"
        populate_store(url, nodes)
        for case in ("imports", "engine", "runtime"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", case, str(nodes), url],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            result = json.loads(out.strip().splitlines()[-1])
            results.append({"nodes": nodes, "gpus": nodes * GPUS, **result})
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--child"]:
        _, case, nodes, url = args_list
        print(json.dumps(child(case, int(nodes), url)))
        return 0
    args = parse_args(__doc__ or "", args_list)
    nodes = 500 if args.quick else 5_000
    results = run(nodes)
    print_table(
        f"Resident memory ({nodes} nodes x {GPUS} GPUs, {nodes * PODS_PER_NODE} pods; "
        f"goal <= {GOAL_MB:.0f} MB)",
        ["case", "nodes", "allocations", "rss MB", "peak MB", "objects", "full GC ms", "frozen ms"],
        [
            [
                r["case"],
                r["nodes"],
                r["allocations"],
                r["rss_mb"],
                r["peak_rss_mb"],
                r["tracked_objects"],
                r["full_gc_ms"],
                r["full_gc_frozen_ms"],
            ]
            for r in results
        ],
    )
    write_json(args.json, "memory", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
