"""The bind's store transaction alone, on SQLite and PostgreSQL: CPU and wall time each.

A bind's store work is one transaction (``store.run_transaction``, as the bind's
``SqlBindStore`` runs it): check out a connection, lock the node's row, read its devices
and the grants they hold, re-check each pod's fit, insert the rows, commit. Its CPU is
the extender's own, taken from the interpreter the verbs need, and on PostgreSQL it is a
good part of a scheduling cycle's (``bind_throughput``). This benchmark runs that
transaction in a loop on a store of ``NODES`` nodes of 8 GPUs, each pod asking for one
GPU share (80 fit a node), one pod per transaction and ``BATCH`` pods per transaction
(as binds queued for one node are written together), and reports per transaction the
process's CPU time (``time.process_time``) and the wall time, medians of ``ROUNDS``
rounds, and the CPU per pod. ``cpu_gauge_ms`` (a fixed pure-Python loop, timed first)
tells how fast the machine was.

PostgreSQL comes from ``VGPU_BENCH_POSTGRES_URL`` (else ``VGPU_TEST_POSTGRES_URL``, else
the test server), a throw-away database; its rows are left out, with a note, when no
server answers.

Run: ``python -m benchmarks.bind_transaction [--json PATH] [--quick]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import argument_parser, cpu_gauge_ms, median, print_table, write_json
from benchmarks.stores import ThrowawayDatabase, postgres_server

NODES = 200
GPUS = 8
#: Pods per transaction in the batched case (binds to one node written together).
BATCH = 4
#: GPU shares of 8,000 MiB and 10 % of the cores: ten fit a GPU.
SHARE_MIB, SHARE_CORES = 8000, 10


@dataclass(frozen=True, slots=True)
class Size:
    transactions: int  # per round
    rounds: int
    warmup: int


FULL = Size(transactions=1000, rounds=3, warmup=100)
QUICK = Size(transactions=40, rounds=1, warmup=5)


STORES = ("sqlite", "postgresql")


@contextmanager
def fresh_store(name: str, server: str | None) -> Iterator[str | None]:
    """The URL of an empty database for ``name`` (None: no PostgreSQL server)."""
    if name == "sqlite":
        with TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    if server is None:
        yield None
        return
    database = ThrowawayDatabase(server)
    try:
        yield database.url
    finally:
        database.drop()


def _engine(url: str) -> Any:
    """A migrated store with ``NODES`` nodes of ``GPUS`` GPUs and nothing allocated."""
    from vgpu_extender import store
    from vgpu_extender.domain import Device, NodeInventory

    engine = store.make_engine(url)
    store.migrate(engine)
    now = datetime.now(UTC)
    with store.session_factory(engine).begin() as session:
        for n in range(NODES):
            devices = tuple(
                Device(
                    uuid=f"GPU-{n}-{i}",
                    index=i,
                    count=10,
                    memory_mib=81920,
                    cores=100,
                    type="NVIDIA-A100-SXM4-80GB",
                )
                for i in range(GPUS)
            )
            inventory = NodeInventory(name=f"node-{n:03d}", devices=devices)
            store.upsert_node(session, inventory=inventory, source="api", now=now)
    return engine


def _transactions(engine: Any, pods_per_transaction: int) -> Callable[[int], None]:
    """``write(k)``: the ``k``-th transaction, its pods on one node, each on a GPU with
    room (the pods go round the nodes, then the GPUs, then the shares)."""
    from vgpu_extender import store
    from vgpu_extender.domain import DeviceGrant, PodAssignment
    from vgpu_extender.store.reservations import Reservation

    def write(k: int) -> None:
        node = k % NODES
        first = (k // NODES) * pods_per_transaction
        pods = []
        for j in range(first, first + pods_per_transaction):
            grant = DeviceGrant(f"GPU-{node}-{j % GPUS}", SHARE_MIB, SHARE_CORES)
            uid = f"pod-{k}-{j}"
            assignment = PodAssignment(node=f"node-{node:03d}", containers=((grant,),))
            pods.append(Reservation(uid, "bench", uid, assignment))

        def reserve(connection: Any) -> list[Any]:
            return store.reserve_all(connection, pods, now=datetime.now(UTC))

        refusals = store.run_transaction(engine, reserve, operation="reserve")
        if any(refusal is not None for refusal in refusals):
            raise RuntimeError(f"transaction {k} refused: {refusals}")

    return write


def time_case(url: str, pods_per_transaction: int, size: Size) -> dict[str, float]:
    """CPU and wall ms per transaction (medians of the rounds), on the empty store."""
    total = (size.warmup + size.rounds * size.transactions) * pods_per_transaction
    if total > NODES * GPUS * 10:
        raise ValueError(f"{total} pods do not fit the store's {NODES} nodes")
    engine = _engine(url)
    try:
        write = _transactions(engine, pods_per_transaction)
        k = 0
        for _ in range(size.warmup):
            write(k)
            k += 1
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(size.rounds):
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            for _ in range(size.transactions):
                write(k)
                k += 1
            cpu.append(1e3 * (time.process_time() - cpu_start) / size.transactions)
            wall.append(1e3 * (time.perf_counter() - wall_start) / size.transactions)
    finally:
        engine.dispose()
    return {"cpu_ms": median(cpu), "wall_ms": median(wall)}


def run(size: Size) -> list[dict[str, Any]]:
    """One row per store and batch size, each on a fresh database."""
    server = postgres_server("the PostgreSQL rows")
    rows: list[dict[str, Any]] = []
    for name in STORES:
        for pods in (1, BATCH):
            gauge = cpu_gauge_ms()
            with fresh_store(name, server) as url:
                if url is None:
                    continue
                timed = time_case(url, pods, size)
            rows.append(
                {
                    "store": name,
                    "pods_per_transaction": pods,
                    "transactions": size.transactions * size.rounds,
                    "cpu_ms_per_transaction": timed["cpu_ms"],
                    "wall_ms_per_transaction": timed["wall_ms"],
                    "cpu_ms_per_pod": timed["cpu_ms"] / pods,
                    "cpu_gauge_ms": gauge,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    options = argument_parser(__doc__.splitlines()[0]).parse_args(argv)
    rows = run(QUICK if options.quick else FULL)
    print_table(
        f"the bind's store transaction, {NODES} nodes of {GPUS} GPUs",
        (
            "store",
            "pods / transaction",
            "transactions",
            "CPU ms / transaction",
            "wall ms / transaction",
            "CPU ms / pod",
            "CPU gauge ms",
        ),
        [
            (
                r["store"],
                r["pods_per_transaction"],
                r["transactions"],
                r["cpu_ms_per_transaction"],
                r["wall_ms_per_transaction"],
                r["cpu_ms_per_pod"],
                r["cpu_gauge_ms"],
            )
            for r in rows
        ],
    )
    write_json(options.json, "bind_transaction", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
