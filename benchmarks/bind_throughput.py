"""Whole scheduling cycles per second, as kube-scheduler drives them, SQLite and PostgreSQL.

Three processes, as in a cluster: the extender (``vgpu-extender serve``, its store on
SQLite or PostgreSQL), the test Kubernetes API server (holding 1,000 nodes of 8 GPUs,
registered by their device-plugin annotation, and the pending pods, each asking for one
GPU share), and this process in kube-scheduler's place.

This process does what kube-scheduler does per pod. The scheduling cycle runs one pod
at a time: filter (every node's name, as with ``percentageOfNodesToScore: 100``, which
the deployment sets), then prioritize the feasible nodes (skipped when only one is
left, as kube-scheduler does), then pick the host with the highest score (the in-tree
plugins would score these identical nodes alike; ties go to the first name, where
kube-scheduler picks one at random). The binding cycle runs apart, as kube-scheduler's
does in its own goroutine: the bind goes to one of ``--binders`` threads (16 by
default), each with its own keep-alive connection, and the next pod's filter starts at
once, overlapping the binds in flight. A pod's cycle starts only once a binder is
free, so at most that many binds are in flight; ``--binders 1`` makes the cycles
strictly serial, for comparison. The extender's bind writes the store and creates the
Binding, which carries the device annotations.

The client is lean (``benchmarks.lean_http`` keep-alive connections, msgspec), as
Go's is, so that on a small machine the cores go to the extender it measures.
``cycles_per_s`` is pods / wall time from the first filter to the last bind answered;
``median_ms`` and ``p99_ms`` are per pod, filter sent to bind answered (retries
included); ``binds_per_transaction`` is the binds the extender wrote per store
transaction in the measured run (its ``vgpu_extender_bind_batch_size`` metric), and
``server_filter_ms``, ``server_prioritize_ms`` and ``server_bind_ms`` each verb's mean
time inside the extender in that run (its ``vgpu_extender_request_duration_seconds``:
from the request handed over by uvicorn, body read, to the answer handed back; a bind's
includes its store transaction and the Binding's round trip);
``extender_kernel_share`` and ``extender_switches_per_cycle`` are the kernel's part of
the extender's CPU time and its threads' context switches per cycle (``/proc``): with
binds in flight the threads take turns on the interpreter, and what a switch costs
varies more between hours of a shared machine than the CPU gauge does. A few
unmeasured pods warm the extender up first. With binds in flight, a
node can fill up between a pod's filter and its bind (the extender learns of a
placement only when its bind arrives): the bind is refused and the pod goes round
again, as kube-scheduler requeues it; ``refused`` counts those. A pod refused five
times, or a broken connection, fails the run; afterwards every pod must be bound, on
the API server, to the host chosen for it and carry its device annotation, or the run
fails. ``--quick`` is a smoke run (100 nodes, 40 pods), not a measurement.

Run: ``python -m benchmarks.bind_throughput [--binders N ...] [--repeat N] [--nodes N] [--json PATH]
[--quick]``. ``--repeat`` runs every combination N times in alternating rounds and
reports medians; ``cpu_gauge_ms`` (a fixed pure-Python loop, timed before each run)
tells how fast the machine was.
PostgreSQL comes from ``VGPU_BENCH_POSTGRES_URL`` (default: the test server); its rows
are skipped, with a warning, when none answers.
"""

from __future__ import annotations

import argparse
import http.client
import os
import queue
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from urllib.parse import urlsplit

import msgspec
import sqlalchemy
from prometheus_client.parser import text_string_to_metric_families

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (
    argument_parser,
    cpu_gauge_ms,
    median,
    percentile,
    print_table,
    write_json,
)
from benchmarks.lean_http import LeanConnection
from tests.support.apiserver_process import ApiServerProcess
from tests.support.server import bind_args, node_json, pod_json, spawn_extender, write_kubeconfig

GPUS = 8
DEFAULT_BINDERS = 16
ALLOCATED = "hami.io/vgpu-devices-allocated"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
NODES_TIMEOUT_S = 120.0
#: Binds of one pod refused before the run fails (kube-scheduler would keep retrying).
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Size:
    nodes: int
    pods: int  # measured
    warmup: int  # pods scheduled first, not measured


FULL = Size(nodes=1_000, pods=1_000, warmup=20)
# The extender's start-up grows with the nodes: a smoke run keeps them few.
QUICK = Size(nodes=100, pods=40, warmup=5)


# ------------------------------------------------------------------------------ wire
class FilterResult(msgspec.Struct):
    NodeNames: list[str] | None = None
    Error: str = ""


class HostPriority(msgspec.Struct):
    Host: str
    Score: int


class BindResult(msgspec.Struct):
    Error: str = ""


FILTER = msgspec.json.Decoder(FilterResult)
PRIORITIES = msgspec.json.Decoder(list[HostPriority])
BIND = msgspec.json.Decoder(BindResult)
ENCODE = msgspec.json.Encoder()


class Connection:
    """One keep-alive connection to the extender; anything but HTTP 200 raises."""

    def __init__(self, url: str) -> None:
        self._http = LeanConnection(url)

    def post(self, path: str, body: bytes) -> bytes:
        status, data = self._http.post(path, body)
        if status != 200:
            raise RuntimeError(f"{path}: HTTP {status}: {data[:500]!r}")
        return data

    def close(self) -> None:
        self._http.close()


def best_host(feasible: Sequence[str], scores: Sequence[HostPriority]) -> str:
    """The highest score wins; ties go to the first name, so runs repeat. A host left
    out of the answer scores 0 (the extender leaves those out), below any listed one."""
    if not scores:
        return min(feasible)
    top = max(s.Score for s in scores)
    return min(s.Host for s in scores if s.Score == top)


# ------------------------------------------------------------------------------ binding
class Binders:
    """The binding cycles: ``count`` threads, each on its own connection, bind in
    hand-off order and note when each pod's bind was answered.

    A refused bind sends its pod back to the scheduling queue, as kube-scheduler does
    (a node may fill up between a pod's filter and its bind while other binds are in
    flight); a pod refused ``MAX_ATTEMPTS`` times, or a broken connection, fails the run.
    """

    def __init__(self, url: str, count: int) -> None:
        self._jobs: queue.SimpleQueue[tuple[dict[str, Any], bytes, int] | None] = (
            queue.SimpleQueue()
        )
        self._free = threading.Semaphore(count)
        self._answered = threading.Condition()
        self._retries: list[tuple[dict[str, Any], int]] = []
        self.attempts: Counter[str] = Counter()
        self.refused = 0
        self.bound = 0
        self.in_flight = 0
        self.latencies_ms: list[float] = []
        self.last_answer_ns = 0
        self.failure: str | None = None
        self._threads = [
            threading.Thread(target=self._work, args=(url,), name=f"binder-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def reserve(self) -> None:
        """Wait for a free binder: at most ``count`` binds are in flight."""
        self._free.acquire()

    def hand_off(self, pod: dict[str, Any], body: bytes, started_ns: int) -> None:
        """Bind ``pod`` on the binder ``reserve`` waited for."""
        with self._answered:
            self.in_flight += 1
        self._jobs.put((pod, body, started_ns))

    def requeued(self, *, wait: bool) -> list[tuple[dict[str, Any], int]]:
        """Pods whose bind was refused (with when their first cycle started); with
        ``wait``, first wait for some bind in flight to be answered."""
        with self._answered:
            if wait and not self._retries and self.in_flight and self.failure is None:
                self._answered.wait()
            retries, self._retries = self._retries, []
        return retries

    def finish(self) -> None:
        """Wait for every bind handed off; the first failure, if any, raises."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        if self.failure is not None:
            raise RuntimeError(self.failure)

    def _work(self, url: str) -> None:
        connection = Connection(url)
        try:
            while (job := self._jobs.get()) is not None:
                pod, body, started_ns = job
                name = pod["metadata"]["name"]
                broken = False
                try:
                    error = BIND.decode(connection.post("/bind", body)).Error
                except Exception as exc:  # a dead connection fails the run, not the thread
                    error, broken = f"{type(exc).__name__}: {exc}", True
                answered_ns = time.perf_counter_ns()
                with self._answered:
                    self.in_flight -= 1
                    self.attempts[name] += 1
                    if not error:
                        self.bound += 1
                        self.latencies_ms.append((answered_ns - started_ns) / 1e6)
                        self.last_answer_ns = max(self.last_answer_ns, answered_ns)
                    elif broken or self.attempts[name] >= MAX_ATTEMPTS:
                        self.failure = self.failure or f"bind of {name} failed: {error}"
                    else:
                        self.refused += 1
                        self._retries.append((pod, started_ns))
                    self._answered.notify_all()
                self._free.release()
        finally:
            connection.close()


# ------------------------------------------------------------------------------ scheduling
@dataclass(frozen=True)
class Run:
    wall_s: float
    latencies_ms: list[float]
    hosts: dict[str, str]  # pod name -> the host its successful bind named
    refused: int  # binds refused and retried
    extender: CpuReading | None = None  # what the extender used during the run
    apiserver_cpu_s: float | None = None  # the test API server's CPU time
    client_cpu_s: float | None = None  # this process's (kube-scheduler's stand-in)
    #: Binds per store transaction during the run, from the extender's own metric.
    binds_per_transaction: float | None = None
    #: Each verb's mean server-side time in the run, ms (the extender's own metric).
    verb_ms: dict[str, float] = field(default_factory=dict)


def schedule(url: str, pods: Sequence[dict[str, Any]], names: list[str], binders: int) -> Run:
    """Scheduling cycles one after the other, binding cycles handed to ``binders``;
    refused pods go round again until every pod is bound."""
    connection = Connection(url)
    pool = Binders(url, binders)
    hosts: dict[str, str] = {}
    queued: deque[tuple[dict[str, Any], int | None]] = deque((pod, None) for pod in pods)
    first_ns = time.perf_counter_ns()
    try:
        while pool.bound < len(pods) and pool.failure is None:
            # A refused pod goes first, as kube-scheduler's queue orders pods by when
            # they were first queued.
            queued.extendleft(reversed(pool.requeued(wait=not queued)))
            if not queued:
                continue
            # With one binder the previous bind is answered before this filter: serial.
            pool.reserve()
            pod, first_started_ns = queued.popleft()
            started_ns = time.perf_counter_ns()
            body = ENCODE.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
            result = FILTER.decode(connection.post("/filter", body))
            feasible = result.NodeNames or []
            if result.Error or not feasible:
                raise RuntimeError(f"filter found no node: {result.Error or 'empty answer'}")
            host = feasible[0]
            if len(feasible) > 1:
                body = ENCODE.encode({"Pod": pod, "Nodes": None, "NodeNames": feasible})
                scores = PRIORITIES.decode(connection.post("/prioritize", body))
                host = best_host(feasible, scores)
            hosts[pod["metadata"]["name"]] = host
            bind = ENCODE.encode(bind_args(pod, host))
            pool.hand_off(pod, bind, first_started_ns or started_ns)
    finally:
        connection.close()
        pool.finish()
    return Run((pool.last_answer_ns - first_ns) / 1e9, pool.latencies_ms, hosts, pool.refused)


def check_bound(api: ApiServerProcess, hosts: dict[str, str]) -> None:
    """Every pod is bound, on the API server, to its host and carries its devices."""
    wrong: list[str] = []
    seen = {p["metadata"]["name"]: p for p in api.pods()}
    for name, host in hosts.items():
        pod = seen.get(name, {})
        node = pod.get("spec", {}).get("nodeName")
        annotations = pod.get("metadata", {}).get("annotations") or {}
        if node != host or ALLOCATED not in annotations:
            wrong.append(
                f"{name} (nodeName {node!r}, {ALLOCATED} present: {ALLOCATED in annotations})"
            )
    if wrong:
        raise RuntimeError(
            f"{len(wrong)} of {len(hosts)} pods are not bound as the extender answered, "
            f"e.g. {', '.join(wrong[:5])}"
        )


@dataclass(frozen=True)
class CpuReading:
    """What a process has used so far: CPU seconds, the kernel's part of them, and its
    threads' context switches (voluntary and not)."""

    cpu_s: float
    kernel_s: float
    switches: int

    def since(self, earlier: CpuReading) -> CpuReading:
        return CpuReading(
            self.cpu_s - earlier.cpu_s,
            self.kernel_s - earlier.kernel_s,
            self.switches - earlier.switches,
        )


def cpu_reading(pid: int) -> CpuReading | None:
    """The process's CPU time and context switches so far; None where /proc is missing.
    Switches are summed over the threads alive now (``/proc/PID/status`` counts the
    main thread's alone): a thread that ends between two readings would be missed, and
    the extender's and the API server's threads live as long as they do."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        threads = list(Path(f"/proc/{pid}/task").iterdir())
        switches = sum(_switches(thread / "status") for thread in threads)
    except OSError:
        return None
    # utime and stime are fields 14 and 15 of stat(5), in clock ticks.
    tick = os.sysconf("SC_CLK_TCK")
    user, kernel = int(fields[11]) / tick, int(fields[12]) / tick
    return CpuReading(user + kernel, kernel, switches)


def _switches(status: Path) -> int:
    try:
        text = status.read_text()
    except OSError:  # the thread ended meanwhile
        return 0
    total = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in _SWITCH_FIELDS:
            total += int(value)
    return total


_SWITCH_FIELDS = frozenset({"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"})


#: The verbs whose server-side time a row reports, as the extender's metric names them.
VERBS = ("filter", "prioritize", "bind")


@dataclass(frozen=True)
class Scrape:
    """What the run reads from the extender's ``/metrics``: its bind batches
    (``vgpu_extender_bind_batch_size``: transactions, binds) and, per verb, the time it
    spent answering (``vgpu_extender_request_duration_seconds``: requests, seconds),
    from request received to answer sent, uvicorn's own reading and writing aside."""

    transactions: float = 0.0
    binds: float = 0.0
    requests: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def scrape(url: str) -> Scrape:
    """The extender's bind-batch and per-verb duration counters, now."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    found = Scrape()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            verb = sample.labels.get("verb", "")
            if sample.name == "vgpu_extender_bind_batch_size_count":
                found = replace(found, transactions=sample.value)
            elif sample.name == "vgpu_extender_bind_batch_size_sum":
                found = replace(found, binds=sample.value)
            elif sample.name == "vgpu_extender_request_duration_seconds_count":
                found.requests[verb] = sample.value
            elif sample.name == "vgpu_extender_request_duration_seconds_sum":
                found.seconds[verb] = sample.value
    return found


def per_transaction(before: Scrape, after: Scrape) -> float | None:
    transactions, binds = after.transactions - before.transactions, after.binds - before.binds
    return round(binds / transactions, 2) if transactions else None


def verb_means_ms(before: Scrape, after: Scrape) -> dict[str, float]:
    """Each verb's mean server-side time in the run, in ms (verbs not called are left out)."""
    means: dict[str, float] = {}
    for verb in VERBS:
        calls = after.requests.get(verb, 0.0) - before.requests.get(verb, 0.0)
        if calls > 0:
            spent = after.seconds.get(verb, 0.0) - before.seconds.get(verb, 0.0)
            means[verb] = round(1000.0 * spent / calls, 3)
    return means


def wait_for_nodes(url: str, pod: dict[str, Any], names: list[str]) -> None:
    """The extender learns the nodes from its node watch: wait until it has them all."""
    connection = Connection(url)
    probe = ENCODE.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
    deadline = time.monotonic() + NODES_TIMEOUT_S
    try:
        while len(FILTER.decode(connection.post("/filter", probe)).NodeNames or []) < len(names):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the extender did not learn the {len(names)} nodes")
            time.sleep(0.2)
    finally:
        connection.close()


def cycles(database: str, folder: Path, size: Size, binders: int) -> Run:
    """The measured run on a fresh cluster, extender and ``database``."""
    names = [f"gpu-node-{i:04d}" for i in range(size.nodes)]
    nodes = [node_json(n, gpus=GPUS, mem=81920, model="NVIDIA-A100-SXM4-80GB") for n in names]
    # 80 such pods fit a node (8 GPUs x 10 shares, 10 x 8000 MiB): room for them all.
    objects = [
        pod_json(f"bench-{i:05d}", mem=8000, cores=10) for i in range(size.warmup + size.pods)
    ]
    # Each bind changes its pod twice or more: keep every change for the extender's watch.
    history = 10 * len(objects) + len(nodes)
    with ApiServerProcess.start(nodes=nodes, pods=objects, history_limit=history) as api:
        # kube-scheduler sends the pods as its informer has them: with their UID and
        # resourceVersion.
        stored = {pod["metadata"]["name"]: pod for pod in api.pods()}
        objects = [stored[pod["metadata"]["name"]] for pod in objects]
        extender = spawn_extender(
            env={
                "VGPU_DATABASE_URL": database,
                "VGPU_KUBECONFIG": str(write_kubeconfig(folder / "kubeconfig", api.url)),
                "VGPU_LOG_LEVEL": "WARNING",
            },
            log=folder / "extender.log",
        )
        try:
            wait_for_nodes(extender.url, objects[0], names)
            warm = schedule(extender.url, objects[: size.warmup], names, binders)
            pids = (extender.process.pid, api.process.pid)
            # Scraped outside the CPU readings: rendering /metrics is not a cycle's work.
            scraped_before = scrape(extender.url)
            before = [cpu_reading(pid) for pid in pids]
            client_before = time.process_time()
            measured = schedule(extender.url, objects[size.warmup :], names, binders)
            client_cpu_s = time.process_time() - client_before
            after = [cpu_reading(pid) for pid in pids]
            scraped_after = scrape(extender.url)
            spent = [
                b.since(a) if a is not None and b is not None else None
                for a, b in zip(before, after, strict=True)
            ]
            measured = replace(
                measured,
                extender=spent[0],
                apiserver_cpu_s=None if spent[1] is None else spent[1].cpu_s,
                client_cpu_s=client_cpu_s,
                binds_per_transaction=per_transaction(scraped_before, scraped_after),
                verb_ms=verb_means_ms(scraped_before, scraped_after),
            )
        finally:
            extender.stop()
        check_bound(api, {**warm.hosts, **measured.hosts})
    return measured


# ------------------------------------------------------------------------------ stores
@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A throw-away database on the benchmark's PostgreSQL server, or None (with a warning)."""
    server = os.environ.get("VGPU_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    name = f"vgpu_bench_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        admin.dispose()
        print(f"PostgreSQL not reachable, its rows are skipped: {exc}", file=sys.stderr)
        yield None
        return
    try:
        yield (
            sqlalchemy.engine.make_url(server)
            .set(database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


STORES = ("sqlite", "postgresql")


def run(size: Size, binders: Sequence[int], repeat: int = 1) -> list[dict[str, Any]]:
    """One row per store and binder count, each run on a fresh cluster and database.

    With ``repeat``, every combination runs that many times, in rounds (each round runs
    every combination once, in the reverse order of the round before), so that a slow
    spell of a shared machine falls on all of them alike; each row is then the median
    of its runs (``summarise``).
    """
    combinations = [(store, count) for store in STORES for count in binders]
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    skipped: set[str] = set()
    with TemporaryDirectory() as tmp:
        for round_ in range(repeat):
            order = combinations if round_ % 2 == 0 else combinations[::-1]
            for store, count in order:
                if store in skipped:
                    continue
                folder = Path(tmp) / f"{store}-{count}-{round_}"
                folder.mkdir()
                database: AbstractContextManager[str | None] = (
                    nullcontext(f"sqlite:///{folder / 'bench.db'}")
                    if store == "sqlite"
                    else postgres_database()
                )
                gauge = cpu_gauge_ms()
                with database as url:
                    if url is None:
                        skipped.add(store)
                        continue
                    measured = cycles(url, folder, size, count)
                runs.setdefault((store, count), []).append(
                    row_of(store, count, size, measured, gauge)
                )
    return [summarise(runs[key]) for key in combinations if key in runs]


def row_of(store: str, count: int, size: Size, measured: Run, gauge: float) -> dict[str, Any]:
    """One run's row."""
    return {
        "case": "filter+prioritize+bind",
        "store": store,
        "nodes": size.nodes,
        "mode": "names",
        "binders": count,
        "pods": len(measured.latencies_ms),
        "cycles_per_s": round(len(measured.latencies_ms) / measured.wall_s, 1),
        "median_ms": round(median(measured.latencies_ms), 3),
        "p99_ms": round(percentile(measured.latencies_ms, 99.0), 3),
        "refused": measured.refused,
        "cpu_gauge_ms": gauge,
        **extender_cpu(measured),
        **(
            {}
            if measured.binds_per_transaction is None
            else {"binds_per_transaction": measured.binds_per_transaction}
        ),
        **{f"server_{verb}_ms": ms for verb, ms in measured.verb_ms.items()},
    }


#: Fields that are the same in every run of one combination.
_FIXED = ("case", "store", "nodes", "mode", "binders", "pods")


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one combination as one row: each measured field is the median of the
    runs (``refused``: the total), ``runs`` counts them and ``cycles_per_s_runs`` lists
    each run's rate in the order they ran."""
    first = runs[0]
    row: dict[str, Any] = {key: first[key] for key in _FIXED}
    for key in first:
        if key in _FIXED:
            continue
        values = [r[key] for r in runs if key in r]
        if key == "refused":
            row[key] = sum(values)
        else:
            row[key] = round(median(values), 3)
    row["runs"] = len(runs)
    row["cycles_per_s_runs"] = [r["cycles_per_s"] for r in runs]
    return row


def extender_cpu(run: Run) -> dict[str, float]:
    """CPU time per cycle of the extender, the test API server and this client (the
    database's is not counted), and the cycles per second the extender's CPU time
    allows on one core of its own: what it could sustain with the API server, the
    database and kube-scheduler elsewhere, as they are in a cluster. For the extender
    also the kernel's share of its CPU time and its threads' context switches per
    cycle: most of that share is switching between the threads that take turns on the
    interpreter, and its cost per switch is what differs most between one hour of a
    shared machine and the next (the CPU gauge, a pure-Python loop, does not see it)."""
    if not run.latencies_ms:
        return {}
    cycles = len(run.latencies_ms)
    row: dict[str, float] = {}
    if run.extender is not None:
        per_cycle_ms = 1000.0 * run.extender.cpu_s / cycles
        row["extender_cpu_ms_per_cycle"] = round(per_cycle_ms, 3)
        row["extender_bound_cycles_per_s"] = round(1000.0 / per_cycle_ms, 1)
        if run.extender.cpu_s > 0:
            row["extender_kernel_share"] = round(run.extender.kernel_s / run.extender.cpu_s, 3)
        row["extender_switches_per_cycle"] = round(run.extender.switches / cycles, 1)
    if run.apiserver_cpu_s is not None:
        row["apiserver_cpu_ms_per_cycle"] = round(1000.0 * run.apiserver_cpu_s / cycles, 3)
    if run.client_cpu_s is not None:
        row["client_cpu_ms_per_cycle"] = round(1000.0 * run.client_cpu_s / cycles, 3)
    return row


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argument_parser(__doc__ or "")
    parser.add_argument(
        "--binders",
        type=int,
        nargs="+",
        default=[DEFAULT_BINDERS],
        metavar="N",
        help=f"binds in flight at once; one row per value (default {DEFAULT_BINDERS}, 1: serial)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run every store and binder count N times, in alternating rounds; "
        "each row is the median of its runs (default 1)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help=f"nodes of {GPUS} GPUs in the cluster (default {FULL.nodes}; "
        f"{QUICK.nodes} with --quick)",
    )
    options = parser.parse_args(argv)
    if options.nodes is not None and options.nodes < 1:
        parser.error("--nodes: must be at least 1")
    if min(options.binders) < 1:
        parser.error("--binders: every value must be at least 1")
    if options.repeat < 1:
        parser.error("--repeat: must be at least 1")
    return options


def _rate(row: dict[str, Any]) -> str:
    rates = row["cycles_per_s_runs"]
    if len(rates) == 1:
        return f"{row['cycles_per_s']:.1f}"
    return f"{row['cycles_per_s']:.1f} ({min(rates):.0f}-{max(rates):.0f})"


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    size = QUICK if options.quick else FULL
    if options.nodes is not None:
        size = Size(nodes=options.nodes, pods=size.pods, warmup=size.warmup)
    results = run(size, options.binders, options.repeat)
    runs = f", median of {options.repeat} runs (range)" if options.repeat > 1 else ""
    print_table(
        f"bind cycles, {size.nodes} nodes x {GPUS} GPUs, test API server in its own process{runs}",
        (
            "store",
            "binders",
            "pods",
            "cycles/s",
            "median ms",
            "p99 ms",
            "refused",
            "extender CPU ms/cycle",
            "extender-bound cycles/s",
            "extender kernel share",
            "extender switches/cycle",
            "API server CPU ms/cycle",
            "client CPU ms/cycle",
            "binds / store transaction",
            *(f"server {verb} ms" for verb in VERBS),
            "CPU gauge ms",
        ),
        [
            (
                r["store"],
                r["binders"],
                r["pods"],
                _rate(r),
                r["median_ms"],
                r["p99_ms"],
                r["refused"],
                r.get("extender_cpu_ms_per_cycle", "n/a"),
                r.get("extender_bound_cycles_per_s", "n/a"),
                r.get("extender_kernel_share", "n/a"),
                r.get("extender_switches_per_cycle", "n/a"),
                r.get("apiserver_cpu_ms_per_cycle", "n/a"),
                r.get("client_cpu_ms_per_cycle", "n/a"),
                r.get("binds_per_transaction", "n/a"),
                *(r.get(f"server_{verb}_ms", "n/a") for verb in VERBS),
                r["cpu_gauge_ms"],
            )
            for r in results
        ],
    )
    write_json(options.json, "bind_throughput", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
