"""filter and prioritize end to end over HTTP, next to the decode-only floor (``/noop``).

For 100, 1,000, 5,000 and 10,000 nodes of 8 GPUs, half allocated (``engine_fit``'s
cluster), in both ``nodeCacheCapable`` modes (``names``: NodeNames; ``nodes``: full Node
objects carrying the inventory annotation, up to 5,000 nodes), it times:

- ``filter``, ``prioritize`` and ``floor`` (``/noop``) over real HTTP: the extender
  serves in this process (uvicorn in a thread, standalone, SQLite, with the HTTP protocol
  ``serve`` gives it), and a separate client
  process sends the requests one at a time on a keep-alive connection, so the client
  never competes with the server for the GIL. The client is ``benchmarks.lean_http``,
  as in ``bind_throughput``: kube-scheduler's Go client spends microseconds per
  request, ``http.client`` about 0.07 ms more per request here, and more in the tail
  (it parses every answer's head with the ``email`` package);
- on each ``filter`` row, ``filter_prioritize_*``: filter and then prioritize sent one
  after the other and timed together, over HTTP: what one pod costs kube-scheduler;
- on each ``filter`` row, ``in_process_filter_prioritize_*``: the same two requests
  handled in-process, decode to encoded answer, without HTTP: the server-side cost the
  design budgets (~1 ms at 5,000 nodes, names mode);
- on every row, ``cpu_gauge_ms``: a fixed pure-Python loop timed first, which tells how
  fast the machine was (compare runs only next to it).

Goals, names mode: filter + prioritize p99 <= 1.0 ms at 5,000 nodes and <= 2.5 ms at
10,000, and at most twice what two decode-only requests take (medians) at both.

``first_filter`` rows time the first nodes-mode filter a fresh, empty extender gets
(every node new to it) on SQLite and on PostgreSQL (``VGPU_BENCH_POSTGRES_URL``, else
``VGPU_TEST_POSTGRES_URL``, else the test server; skipped when none answers), a fresh
extender and store per sample: the nodes go to the index in the request and to the
store after it. Goal at 5,000 nodes: at most 1 s (kube-scheduler's ``httpTimeout`` in
the deploy is 30 s).

``--policy NAME`` serves the node policy ``NAME`` (default: the extender's own,
``binpack``), so that a packing policy's cost can be read against the budget a node
policy has online: filter + prioritize p99 at most 1.5 ms at 5,000 nodes, names mode.
Every row names its ``policy``.

Run: ``python -m benchmarks.extender_latency [--json PATH] [--quick] [--nodes N ...]
[--no-first] [--policy NAME]``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (
    add_nodes_option,
    argument_parser,
    cpu_gauge_ms,
    measure,
    median,
    percentile,
    print_table,
    write_json,
)
from benchmarks.engine_fit import GPUS, build_cluster
from benchmarks.lean_http import LeanConnection
from benchmarks.stores import ThrowawayDatabase, postgres_server

SIZES = (100, 1_000, 5_000, 10_000)
#: Full Node objects are sent up to this size (~10 MB a request at 5,000 nodes); past it,
#: names mode only, as a cluster that large would run.
NODES_MODE_MAX = 5_000
JSON_HEADERS = {"Content-Type": "application/json"}
#: The node policy the extender serves by default, and the budget of any other node
#: policy online: filter + prioritize p99 at most this at GOAL_NODES, names mode.
DEFAULT_POLICY = "binpack"
POLICY_BUDGET_MS = 1.5

POD: dict[str, Any] = {
    # As kube-scheduler sends it: from its informer, with a resourceVersion.
    "metadata": {
        "name": "bench",
        "namespace": "default",
        "uid": "bench-uid",
        "resourceVersion": "4711",
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "resources": {
                    "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10k"},
                    "requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10k"},
                },
            }
        ],
        "priority": 0,
    },
    "status": {"phase": "Pending"},
}


def node_object(name: str, register: str) -> dict[str, Any]:
    """A Node roughly as kube-scheduler sends it (labels, annotations, status)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "gpu": "on",
                "priority.lixueduan.com": str(len(name) % 30),
            },
            "annotations": {"hami.io/node-nvidia-register": register},
        },
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056525036Ki", "nvidia.com/gpu": "80"},
            "allocatable": {"cpu": "96", "memory": "1056422636Ki", "nvidia.com/gpu": "80"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def bodies(nodes: int) -> tuple[dict[str, bytes], Any]:
    """Request bodies per mode, and the cluster they describe."""
    from vgpu_extender.vendors import create_vendor

    cluster = build_cluster(nodes)
    vendor = create_vendor("nvidia")
    names = cluster.names
    objects = [
        node_object(n, vendor.encode_inventory(cluster.index.inventory(n).devices)) for n in names
    ]
    return {
        "names": msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": names}),
        "nodes": msgspec.json.encode(
            {"Pod": POD, "Nodes": {"metadata": {}, "items": objects}, "NodeNames": None}
        ),
    }, cluster


# ------------------------------------------------------------------------------ client
def client_main() -> int:
    """The client process: ``{"port", "cases": [[path, body_file, repeat, warmup?]]}``
    on stdin (warmup 3 unless given), milliseconds per case on stdout."""
    spec = json.load(sys.stdin)
    connection = LeanConnection(f"http://127.0.0.1:{spec['port']}")
    out = []
    for path, body_file, repeat, *warmup in spec["cases"]:
        body = Path(body_file).read_bytes()

        def send(_i: int, path: str = path, body: bytes = body) -> None:
            # PAIR: filter, then prioritize, as kube-scheduler sends them for one pod.
            for one in path.split("+"):
                status, _answer = connection.post(one, body)
                if status != 200:
                    raise RuntimeError(f"{one}: HTTP {status}")

        out.append(measure(send, repeat=repeat, warmup=warmup[0] if warmup else 3, budget_s=30.0))
    connection.close()
    json.dump(out, sys.stdout)
    return 0


# ------------------------------------------------------------------------------ server
def populate(runtime: Any, cluster: Any) -> None:
    """Copy the benchmark cluster into the running extender's index (the store is not
    what is measured, so it is skipped), then freeze what is alive, as ``serve`` does
    once its index is rebuilt from the store."""
    from vgpu_extender.api.app import freeze_startup_objects

    with runtime.cluster.lock:
        index = runtime.cluster.index
        for name in cluster.names:
            index.upsert_node(cluster.index.inventory(name))
        for allocation in cluster.index.allocations():
            index.apply(allocation.pod_uid, allocation.assignment, check=False)
    freeze_startup_objects()


def server_side(runtime: Any, body: bytes, *, repeat: int) -> list[float]:
    from vgpu_extender.api import wire

    scheduling = runtime.scheduling

    def cycle(_i: int) -> None:
        args = wire.decode_args(body)
        wire.encode_filter(args, scheduling.filter(args.pod, args.names, nodes=args.nodes))
        args = wire.decode_args(body)
        wire.encode_priorities(scheduling.prioritize(args.pod, args.names, nodes=args.nodes))

    return measure(cycle, repeat=repeat, warmup=3, budget_s=30.0)


class Server:
    """The extender under uvicorn in a thread, standalone, on a free loopback port."""

    def __init__(
        self, folder: Path, database_url: str | None = None, *, policy: str = DEFAULT_POLICY
    ) -> None:
        import uvicorn

        from vgpu_extender.api import create_app
        from vgpu_extender.serving.limits import connection_limits
        from vgpu_extender.settings import Settings

        url = database_url or f"sqlite:///{folder / 'bench.db'}"
        settings = Settings(database_url=url, kube_mode="off", node_policy=policy)
        # As ``serve`` runs it: the start-up objects frozen out of the collector's
        # passes, no proxy headers, no access log, its HTTP protocol (the connection
        # caps and read timeouts, an answer written at once).
        self.app = create_app(settings, freeze_gc=True)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            proxy_headers=False,
            access_log=False,
            **connection_limits(settings).uvicorn_options(),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the extender did not start")
            time.sleep(0.01)
        self.port: int = self.server.servers[0].sockets[0].getsockname()[1]
        self.runtime = self.app.state.runtime

    def post(self, path: str, body: bytes) -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse().read()
        connection.close()
        return answer

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join()


def run(sizes: Sequence[int], *, quick: bool, policy: str = DEFAULT_POLICY) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for nodes in sizes:
        payloads, cluster = bodies(nodes)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            running = Server(folder, policy=policy)
            try:
                populate(running.runtime, cluster)
                port = running.port
                cases = []
                in_process: dict[str, list[float]] = {}
                for mode, body in payloads.items():
                    if mode == "nodes" and nodes > NODES_MODE_MAX:
                        continue
                    body_file = folder / f"{mode}.json"
                    body_file.write_bytes(body)
                    big = mode == "nodes" and nodes >= 1_000
                    repeat = 5 if quick else (30 if big else 300)
                    # The first nodes-mode request registers the inventory: warm it up here.
                    running.post("/filter", body)
                    for path in ("/filter", "/prioritize", "/noop", PAIR):
                        cases.append((mode, path, str(body_file), repeat))
                    in_process[mode] = server_side(running.runtime, body, repeat=repeat)
                spec = {"port": port, "cases": [[p, f, r] for _m, p, f, r in cases]}
                done = subprocess.run(
                    [sys.executable, __file__, "--client"],
                    input=json.dumps(spec).encode(),
                    capture_output=True,
                    check=True,
                )
                answers = json.loads(done.stdout)
                measured = {
                    (mode, path): samples
                    for (mode, path, _f, _r), samples in zip(cases, answers, strict=True)
                }
                for (mode, path, _f, _r), samples in zip(cases, answers, strict=True):
                    if path == PAIR:
                        continue  # on the filter row
                    row = summary(CASE_OF_PATH[path], nodes, mode, samples)
                    row["policy"] = policy
                    if path == "/filter":
                        pair = measured[(mode, PAIR)]
                        row["filter_prioritize_median_ms"] = round(median(pair), 4)
                        row["filter_prioritize_p99_ms"] = round(percentile(pair, 99.0), 4)
                        # The same filter + prioritize pair handled in-process (decode to
                        # encode, no HTTP): how much of the HTTP time is the extender's own.
                        server = in_process[mode]
                        row["in_process_filter_prioritize_median_ms"] = round(median(server), 4)
                        row["in_process_filter_prioritize_p99_ms"] = round(
                            percentile(server, 99.0), 4
                        )
                    results.append(row)
            finally:
                running.stop()
    return results


# ------------------------------------------------------------------ first sight
FIRST_GOAL_MS = 1_000.0
FIRST_SAMPLES = 3


class Database:
    """A fresh store per sample: a SQLite file, or a database of its own on PostgreSQL."""

    def __init__(self, backend: str, folder: Path, server_url: str | None) -> None:
        import uuid

        self._throwaway: ThrowawayDatabase | None = None
        if backend == "sqlite":
            self.url = f"sqlite:///{folder / f'first-{uuid.uuid4().hex[:8]}.db'}"
            return
        assert server_url is not None
        self._throwaway = ThrowawayDatabase(server_url)
        self.url = self._throwaway.url

    def drop(self) -> None:
        if self._throwaway is not None:
            self._throwaway.drop()


def first_request(nodes: int, *, backends: Sequence[str], samples: int) -> list[dict[str, Any]]:
    """The first nodes-mode filter of a fresh extender, every node new to it."""
    payloads, _cluster = bodies(nodes)
    server_url = postgres_server("first_filter on PostgreSQL") if "postgresql" in backends else None
    rows = []
    for backend in backends:
        if backend == "postgresql" and server_url is None:
            continue
        times: list[float] = []
        stored_after: list[int] = []
        with tempfile.TemporaryDirectory() as tmp:
            body_file = Path(tmp) / "nodes.json"
            body_file.write_bytes(payloads["nodes"])
            for _ in range(samples):
                database = Database(backend, Path(tmp), server_url)
                running = Server(Path(tmp), database.url)
                try:
                    # Sent by the client process, as kube-scheduler would: once, no warm-up.
                    spec = {"port": running.port, "cases": [["/filter", str(body_file), 1, 0]]}
                    done = subprocess.run(
                        [sys.executable, __file__, "--client"],
                        input=json.dumps(spec).encode(),
                        capture_output=True,
                        check=True,
                    )
                    times.extend(json.loads(done.stdout)[0])
                    if count_indexed(running.runtime) != nodes:
                        raise RuntimeError("the first filter did not register every node")
                    if not running.runtime.inventory.drain(300.0):
                        raise RuntimeError("the new nodes never reached the store")
                    stored_after.append(count_nodes(running.runtime))
                finally:
                    running.stop()
                    database.drop()
        row = summary("first_filter", nodes, "nodes", times)
        row["backend"] = backend
        row["p99_ms"] = round(max(times), 4)  # few samples: the worst one
        row["stored_nodes_after"] = min(stored_after)
        rows.append(row)
    return rows


def count_indexed(runtime: Any) -> int:
    with runtime.cluster.lock:
        return len(runtime.cluster.index)


def count_nodes(runtime: Any) -> int:
    from vgpu_extender import store

    with runtime.sessions() as session:
        return len(store.load_inventories(session))


def first_goal(results: Sequence[dict[str, Any]]) -> None:
    for row in results:
        if row["case"] == "first_filter" and row["nodes"] == GOAL_NODES:
            met = row["p99_ms"] <= FIRST_GOAL_MS
            print(
                f"goal at {GOAL_NODES} nodes, first nodes-mode filter on {row['backend']}: "
                f"worst {row['p99_ms']:.0f} ms (<= {FIRST_GOAL_MS:.0f}): "
                f"{'met' if met else 'NOT met'}"
            )


#: filter then prioritize, timed together (the client sends the paths in turn).
PAIR = "/filter+/prioritize"
GOAL_NODES = 5_000
#: Names mode, per cluster size: filter + prioritize p99 at most (ms), and at most this
#: many times two decode-only requests (medians).
GOALS = {5_000: 1.0, 10_000: 2.5}
GOAL_FLOOR_RATIO = 2.0

#: JSON ``case`` per endpoint; ``floor`` is the decode-only endpoint on the same body.
CASE_OF_PATH = {"/filter": "filter", "/prioritize": "prioritize", "/noop": "floor"}


def summary(case: str, nodes: int, mode: str, samples: list[float]) -> dict[str, Any]:
    return {
        "case": case,
        "nodes": nodes,
        "gpus_per_node": GPUS,
        "mode": mode,
        "samples": len(samples),
        "median_ms": round(median(samples), 4),
        "p99_ms": round(percentile(samples, 99.0), 4),
    }


def goal(results: Sequence[dict[str, Any]], policy: str = DEFAULT_POLICY) -> None:
    """Print whether the goals are met in names mode, per goal size run; for a policy
    other than the default, whether it keeps to a node policy's budget."""
    if policy != DEFAULT_POLICY:
        at = {r["case"]: r for r in results if r["nodes"] == GOAL_NODES and r["mode"] == "names"}
        if "filter" in at:
            pair_p99 = at["filter"]["filter_prioritize_p99_ms"]
            met = pair_p99 <= POLICY_BUDGET_MS
            print(
                f"budget at {GOAL_NODES} nodes, names, policy {policy}: filter + prioritize "
                f"p99 {pair_p99:.2f} ms (<= {POLICY_BUDGET_MS}): {'kept' if met else 'NOT kept'}"
            )
        return
    for nodes, most_ms in GOALS.items():
        at = {r["case"]: r for r in results if r["nodes"] == nodes and r["mode"] == "names"}
        if "filter" not in at or "floor" not in at:
            continue
        pair_p99 = at["filter"]["filter_prioritize_p99_ms"]
        ratio = at["filter"]["filter_prioritize_median_ms"] / (2 * at["floor"]["median_ms"])
        met = pair_p99 <= most_ms and ratio <= GOAL_FLOOR_RATIO
        print(
            f"goal at {nodes} nodes, names: filter + prioritize p99 {pair_p99:.2f} ms "
            f"(<= {most_ms}), {ratio:.2f}x two decode-only requests "
            f"(<= {GOAL_FLOOR_RATIO:.0f}x): {'met' if met else 'NOT met'}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--client" in argv:
        return client_main()
    from vgpu_extender.policies import BUILTIN

    parser = argument_parser(__doc__ or "")
    add_nodes_option(parser, SIZES)
    parser.set_defaults(nodes=None)
    parser.add_argument(
        "--no-first", action="store_true", help="leave out the first nodes-mode filter rows"
    )
    parser.add_argument(
        "--policy",
        default=DEFAULT_POLICY,
        choices=sorted(BUILTIN),
        help=f"the node policy the extender serves (default {DEFAULT_POLICY})",
    )
    options = parser.parse_args(argv)
    started = time.perf_counter()
    gauge = cpu_gauge_ms()
    sizes = options.nodes or (SIZES[:2] if options.quick else SIZES)
    results = run(sizes, quick=options.quick, policy=options.policy)
    if options.no_first:
        pass
    elif options.quick:
        results += first_request(SIZES[1], backends=("sqlite",), samples=1)
    else:
        results += first_request(
            GOAL_NODES, backends=("sqlite", "postgresql"), samples=FIRST_SAMPLES
        )
    for result in results:
        result["cpu_gauge_ms"] = gauge
        result.setdefault("policy", DEFAULT_POLICY)  # the first-filter rows serve the default
    rows = [
        (
            r["case"],
            f"{r['mode']} ({r['backend']})" if "backend" in r else r["mode"],
            r["nodes"],
            r["median_ms"],
            r["p99_ms"],
            r.get("filter_prioritize_median_ms", ""),
            r.get("filter_prioritize_p99_ms", ""),
            r.get("in_process_filter_prioritize_median_ms", ""),
            r["samples"],
        )
        for r in sorted(results, key=lambda r: (r["mode"], r["nodes"], r["case"]))
    ]
    print_table(
        f"extender latency, {GPUS} GPUs per node, half allocated, policy {options.policy} "
        f"({time.perf_counter() - started:.0f} s, CPU gauge {gauge} ms)",
        (
            "case",
            "mode",
            "nodes",
            "median ms",
            "p99 ms",
            "f+p median ms",
            "f+p p99 ms",
            "in-process f+p ms",
            "samples",
        ),
        rows,
    )
    goal(results, options.policy)
    first_goal(results)
    write_json(options.json, "extender_latency", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
