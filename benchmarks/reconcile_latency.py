"""filter + prioritize while the periodic reconcile runs, next to the same pair idle.

The extender serves over real HTTP (uvicorn in a thread of this process, SQLite), with
a Kubernetes client holding ``engine_fit``'s cluster: nodes of 8 GPUs carrying the
device plugin's registration annotation, a random half of them busy on every GPU, each
allocation a Running pod bound there with HAMi's allocation annotations and recorded in
the store, as a replica's binds leave them. The client is the in-memory one
(``vgpu_extender.kube.fake``), listing as the real one does: page by page
(``LIST_PAGE`` objects), each page's JSON decoded as the real client decodes it
(``kube.list_page``) in this process after a 1 ms pause standing for its answer's
round trip (the pages are encoded once per change;
no API server competes for the cores).

A separate client process (``extender_latency``'s, a lean keep-alive connection) sends
filter and then prioritize (names mode, every node), timed together, back to back:

- ``during_reconcile``: while a thread runs the periodic pass continuously, one after
  the other (``SyncService.resync`` with the node relist: every Node, then every pod
  listed and reconciled against every allocation), from before a pass begins until
  at least one whole pass has gone by;
- ``idle``: right after, as many pairs with no pass running.

Three rounds of both (one at ``--quick``), so that a busy spell of the machine falls on
both alike. Each row has the pair's median, p99 and worst time; the reconcile row also
the ratio of its p99 to the idle p99, the whole passes it covered and the passes'
median duration. The pass's own duration with no request in flight is
``reconcile_alone_s`` (median of a few). Goal at 10,000 nodes: p99 during the reconcile
at most 2x the idle p99.

Run: ``python -m benchmarks.reconcile_latency [--json PATH] [--quick] [--nodes N ...]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks import extender_latency
from benchmarks.common import (
    add_nodes_option,
    argument_parser,
    cpu_gauge_ms,
    median,
    percentile,
    print_table,
    write_json,
)
from benchmarks.engine_fit import GPUS, build_cluster
from benchmarks.stores import write_cluster
from vgpu_extender.kube.client import Listing, Pace
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.kube.list_page import decode_page
from vgpu_extender.kube.memory import Kind
from vgpu_extender.kube.objects import KubeObject
from vgpu_extender.kube.real import LIST_PAGE

SIZES = (1_000, 10_000)
QUICK_SIZES = (200,)
GOAL_NODES = 10_000
GOAL_RATIO = 2.0
#: Passes timed with no request in flight.
ALONE_PASSES = 3
#: Rounds of samples during the reconcile (each over at least one whole pass), each
#: followed by as many idle samples.
ROUNDS = 3
#: The longest the extender's first sync may take.
START_TIMEOUT_S = 300.0
#: The wait for one page of a list from the API server (a few hundred KB).
PAGE_ROUND_TRIP_S = 0.001


class ListingKubeClient(FakeKubeClient):
    """The in-memory client whose lists cost what the real client's do here: page by
    page (``LIST_PAGE`` objects), each page's JSON decoded as the real client's after a pause
    that stands for its answer's round trip, when the real client waits on its socket
    (the fake's own deep copies cost several times more)."""

    def __init__(self) -> None:
        super().__init__()
        self._pages: dict[str, tuple[str, list[bytes]]] = {}
        self._pages_lock = threading.Lock()

    def list_pods_with_version(
        self, *, node: str | None = None, pace: Pace | None = None
    ) -> Listing:
        if node is not None:
            return super().list_pods_with_version(node=node, pace=pace)
        self._enter("list_pods")
        return self._decoded("pods", pace)

    def list_nodes_with_version(self, *, pace: Pace | None = None) -> Listing:
        self._enter("list_nodes")
        return self._decoded("nodes", pace)

    def _decoded(self, kind: Kind, pace: Pace | None) -> Listing:
        items: list[KubeObject] = []
        version = ""
        for page in self._encoded(kind):
            time.sleep(PAGE_ROUND_TRIP_S)
            body = decode_page(page, f"list {kind}", pace=pace)
            items.extend(body["items"])
            version = version or body["metadata"]["resourceVersion"]
        return Listing(items, version)

    def _encoded(self, kind: Kind) -> list[bytes]:
        """The list's pages as JSON, encoded again only when something changed."""
        version = self.cluster.resource_version
        with self._pages_lock:
            cached = self._pages.get(kind)
            if cached is not None and cached[0] == version:
                return cached[1]
            listing = self.cluster.list_objects(kind)
            meta = {"resourceVersion": listing.resource_version}
            pages = [
                msgspec.json.encode({"items": listing.items[i : i + LIST_PAGE], "metadata": meta})
                for i in range(0, max(1, len(listing.items)), LIST_PAGE)
            ]
            self._pages[kind] = (version, pages)
            return pages


@dataclass
class Objects:
    """The cluster as Kubernetes and the store hold it."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    allocations: list[tuple[str, Any]]  # (pod uid, PodAssignment)
    names: list[str] = field(default_factory=list)


def cluster_objects(nodes: int) -> Objects:
    """``engine_fit``'s cluster: Node objects, and a bound Running pod per allocation."""
    from vgpu_extender.vendors import create_vendor

    cluster = build_cluster(nodes)
    vendor = create_vendor("nvidia")
    node_objects = [
        extender_latency.node_object(n, vendor.encode_inventory(cluster.index.inventory(n).devices))
        for n in cluster.names
    ]
    bind_time = int(time.time())
    pods: list[dict[str, Any]] = []
    allocations: list[tuple[str, Any]] = []
    for allocation in cluster.index.allocations():
        uid, assignment = allocation.pod_uid, allocation.assignment
        annotations = vendor.bind_annotations(assignment, bind_time=bind_time)
        annotations["hami.io/bind-phase"] = "success"
        pods.append(pod_object(uid, assignment, annotations))
        allocations.append((uid, assignment))
    return Objects(node_objects, pods, allocations, list(cluster.names))


def pod_object(uid: str, assignment: Any, annotations: dict[str, str]) -> dict[str, Any]:
    """A Running pod bound to its node, one container asking for its one GPU share."""
    (grant,) = assignment.containers[0]
    limits = {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": str(grant.memory_mib),
        "nvidia.com/gpucores": str(grant.cores),
    }
    return {
        "metadata": {
            "name": uid,
            "namespace": "default",
            "uid": uid,
            "annotations": annotations,
        },
        "spec": {
            "nodeName": assignment.node,
            "schedulerName": "vgpu-scheduler",
            "containers": [{"name": "main", "resources": {"limits": limits, "requests": limits}}],
        },
        "status": {"phase": "Running"},
    }


def populate_store(url: str, objects: Objects) -> None:
    """The store as binds leave it: every node's inventory, every allocation bound."""
    from vgpu_extender.services.inventory import node_inventory
    from vgpu_extender.services.sync import node_view
    from vgpu_extender.vendors import create_vendor_set

    vendors = create_vendor_set("nvidia")
    inventories = []
    for node in objects.nodes:
        inventory = node_inventory(node_view(node), vendors, previous=None, split_count=10)
        assert inventory is not None
        inventories.append(inventory)
    write_cluster(url, inventories, objects.allocations, source="annotation")


class Server:
    """The extender under uvicorn in a thread, on a free loopback port, with ``kube``;
    its own periodic reconcile is left to the benchmark's thread."""

    def __init__(self, url: str, kube: FakeKubeClient) -> None:
        import uvicorn

        from vgpu_extender.api import create_app
        from vgpu_extender.settings import Settings

        settings = Settings(database_url=url, reconcile_interval_s=86_400.0, log_level="WARNING")
        # As `serve` does: what start-up loaded is frozen out of the collector's passes.
        self.app = create_app(settings, kube=kube, freeze_gc=True)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the extender did not start")
            time.sleep(0.01)
        self.port: int = self.server.servers[0].sockets[0].getsockname()[1]
        self.runtime = self.app.state.runtime
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.runtime.sync.passes:  # the first sync's reconcile is done
            if time.monotonic() > deadline:
                raise RuntimeError("the extender's first sync did not finish")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join()


class Reconciler:
    """Runs the periodic pass over and over in a thread while resumed (``resume``,
    ``hold``), until stopped."""

    def __init__(self, runtime: Any) -> None:
        self._sync = runtime.sync
        self._cond = threading.Condition()
        self._wanted = False
        self._stopped = False
        self.in_pass = False
        self.passes: list[float] = []
        self.changes = 0
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="bench-reconcile", daemon=True)
        self._thread.start()

    def one_pass(self) -> float:
        """The periodic pass with the node relist; seconds taken."""
        started = time.perf_counter()
        report = self._sync.resync(nodes=True)
        self.changes += report.changes + report.failed
        return time.perf_counter() - started

    def resume(self) -> None:
        """Start passing again; returns once a pass is under way."""
        with self._cond:
            self._wanted = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.in_pass or self.failure is not None)
        self._check()

    def hold(self) -> None:
        """Stop after the pass under way; returns once it is done."""
        with self._cond:
            self._wanted = False
            self._cond.wait_for(lambda: not self.in_pass)
        self._check()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()
        self._check()

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._wanted or self._stopped)
                    if self._stopped:
                        return
                    self.in_pass = True
                    self._cond.notify_all()
                try:
                    self.passes.append(self.one_pass())
                finally:
                    with self._cond:
                        self.in_pass = False
                        self._cond.notify_all()
        except BaseException as exc:  # reported by the caller's next call
            with self._cond:
                self.failure = exc
                self._cond.notify_all()

    def _check(self) -> None:
        if self.failure is not None:
            raise RuntimeError("the reconcile failed") from self.failure


def serve_cluster(folder: Path, objects: Objects) -> tuple[Server, Path]:
    """The extender on a SQLite store in ``folder`` holding ``objects``, and the file
    of a names-mode filter body naming every node (for ``client_pairs``)."""
    url = f"sqlite:///{folder / 'bench.db'}"
    populate_store(url, objects)
    kube = ListingKubeClient()
    for node in objects.nodes:
        kube.add_node(node)
    for pod in objects.pods:
        kube.add_pod(pod)
    body_file = folder / "names.json"
    body_file.write_bytes(
        msgspec.json.encode(
            {"Pod": extender_latency.POD, "Nodes": None, "NodeNames": objects.names}
        )
    )
    return Server(url, kube), body_file


def client_pairs(port: int, body_file: Path, repeat: int) -> list[float]:
    """filter + prioritize pairs timed by ``extender_latency``'s client process."""
    spec = {"port": port, "cases": [[extender_latency.PAIR, str(body_file), repeat]]}
    done = subprocess.run(
        [sys.executable, extender_latency.__file__, "--client"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        check=True,
    )
    samples: list[float] = json.loads(done.stdout)[0]
    return samples


def row(case: str, nodes: int, pods: int, samples: list[float]) -> dict[str, Any]:
    return {
        "case": case,
        "nodes": nodes,
        "gpus_per_node": GPUS,
        "pods": pods,
        "samples": len(samples),
        "median_ms": round(median(samples), 4),
        "p99_ms": round(percentile(samples, 99.0), 4),
        "max_ms": round(max(samples), 4),
    }


def run_size(nodes: int, *, quick: bool) -> list[dict[str, Any]]:
    objects = cluster_objects(nodes)
    chunk = 10 if quick else 200
    rounds = 1 if quick else ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        running, body_file = serve_cluster(Path(tmp), objects)
        reconciler = Reconciler(running.runtime)
        try:
            runtime = running.runtime
            if len(runtime.cluster.index) != nodes:
                raise RuntimeError(f"the extender holds {len(runtime.cluster.index)} nodes")
            alone = [reconciler.one_pass() for _ in range(1 if quick else ALONE_PASSES)]
            idle: list[float] = []
            during: list[float] = []
            covered = 0
            for _ in range(rounds):
                # The same machine for both: a round of each, in turn.
                reconciler.resume()
                first = len(reconciler.passes) + 1  # the pass under way started before
                samples: list[float] = []
                while len(reconciler.passes) <= first:  # until a whole pass is covered
                    samples += client_pairs(running.port, body_file, chunk)
                covered += len(reconciler.passes) - first
                reconciler.hold()
                during += samples
                idle += client_pairs(running.port, body_file, len(samples))
            if reconciler.changes:
                raise RuntimeError(
                    f"the reconcile changed {reconciler.changes} allocation(s): the cluster "
                    "and the store should agree"
                )
        finally:
            reconciler.stop()
            running.stop()
    idle_row = row("idle", nodes, len(objects.pods), idle)
    during_row = row("during_reconcile", nodes, len(objects.pods), during)
    during_row["p99_ratio"] = round(during_row["p99_ms"] / idle_row["p99_ms"], 3)
    during_row["passes"] = covered
    during_row["pass_median_s"] = round(median(reconciler.passes), 3)
    for each in (idle_row, during_row):
        each["reconcile_alone_s"] = round(median(alone), 3)
    return [idle_row, during_row]


def goal(results: Sequence[dict[str, Any]]) -> None:
    for result in results:
        if result["case"] == "during_reconcile" and result["nodes"] == GOAL_NODES:
            met = result["p99_ratio"] <= GOAL_RATIO
            print(
                f"goal at {GOAL_NODES} nodes: filter + prioritize p99 during the reconcile "
                f"{result['p99_ratio']:.2f}x idle (<= {GOAL_RATIO:.0f}x): "
                f"{'met' if met else 'NOT met'}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argument_parser(__doc__ or "")
    add_nodes_option(parser, SIZES)
    parser.set_defaults(nodes=None)
    options = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    started = time.perf_counter()
    gauge = cpu_gauge_ms()
    results: list[dict[str, Any]] = []
    for nodes in options.nodes or (QUICK_SIZES if options.quick else SIZES):
        results += run_size(nodes, quick=options.quick)
    for result in results:
        result["cpu_gauge_ms"] = gauge
    print_table(
        f"filter + prioritize during the reconcile, {GPUS} GPUs per node, half allocated "
        f"({time.perf_counter() - started:.0f} s, CPU gauge {gauge} ms)",
        (
            "case",
            "nodes",
            "pods",
            "median ms",
            "p99 ms",
            "max ms",
            "p99 / idle",
            "passes",
            "pass s",
            "pass alone s",
            "samples",
        ),
        [
            (
                r["case"],
                r["nodes"],
                r["pods"],
                r["median_ms"],
                r["p99_ms"],
                r["max_ms"],
                r.get("p99_ratio", ""),
                r.get("passes", ""),
                r.get("pass_median_s", ""),
                r["reconcile_alone_s"],
                r["samples"],
            )
            for r in results
        ],
    )
    goal(results)
    write_json(options.json, "reconcile_latency", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
