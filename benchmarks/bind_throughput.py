"""Scheduling cycles per second through a real extender process, SQLite and PostgreSQL.

One cycle is what kube-scheduler does per pod: filter, prioritize, then bind on the
best node; bind reserves in the store, annotates the pod, creates the Binding and
records an Event through a Kubernetes API (the test API server, in this process).
The cluster has 1,000 nodes of 8 GPUs, registered by their device-plugin annotation;
each pod asks for one GPU share. Cycles run one after the other, as kube-scheduler's
scheduling loop does, and the extender runs in its own process.

Run: ``python -m benchmarks.bind_throughput [--json PATH] [--quick]``.
PostgreSQL comes from ``VGPU_BENCH_POSTGRES_URL`` (default: the test server); the case
is skipped when none answers.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
import msgspec
import sqlalchemy

from benchmarks.common import median, parse_args, percentile, print_table, write_json
from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    bind_args,
    node_json,
    pod_json,
    spawn_extender,
    write_kubeconfig,
)

NODES = 1_000
GPUS = 8
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A throw-away database on the benchmark's PostgreSQL server, or None."""
    server = os.environ.get("VGPU_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    name = f"vgpu_bench_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    except sqlalchemy.exc.SQLAlchemyError:
        admin.dispose()
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


def cycles(database: str, folder: Path, pods: int) -> list[float]:
    """Milliseconds per filter -> prioritize -> bind cycle."""
    with FakeApiServer() as api:
        names = [f"gpu-node-{i:04d}" for i in range(NODES)]
        for name in names:
            api.add_node(node_json(name, gpus=GPUS, mem=81920, model="NVIDIA-A100-SXM4-80GB"))
        objects = [api.add_pod(pod_json(f"bench-{i:05d}", mem=8000, cores=10)) for i in range(pods)]
        extender = spawn_extender(
            env={
                "VGPU_DATABASE_URL": database,
                "VGPU_KUBECONFIG": str(write_kubeconfig(folder / "kubeconfig", api.url)),
                "VGPU_LOG_LEVEL": "WARNING",
            },
            log=folder / "extender.log",
        )
        try:
            client = httpx.Client(base_url=extender.url, timeout=60.0)
            # The extender learns the nodes from its node watch: wait until it has them all.
            probe = msgspec.json.encode({"Pod": objects[0], "NodeNames": names})
            while len(client.post("/filter", content=probe).json()["NodeNames"]) < NODES:
                time.sleep(0.2)
            samples: list[float] = []
            for pod in objects:
                body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
                start = time.perf_counter_ns()
                feasible = client.post("/filter", content=body).json()["NodeNames"]
                scores = client.post(
                    "/prioritize",
                    content=msgspec.json.encode({"Pod": pod, "NodeNames": feasible}),
                ).json()
                best = max(scores, key=lambda s: (s["Score"], s["Host"]))["Host"]
                answer = client.post("/bind", content=msgspec.json.encode(bind_args(pod, best)))
                samples.append((time.perf_counter_ns() - start) / 1e6)
                if answer.json()["Error"]:
                    raise RuntimeError(f"bind failed: {answer.json()['Error']}")
            client.close()
            return samples
        finally:
            extender.stop()


def run(*, quick: bool) -> list[dict[str, Any]]:
    pods = 20 if quick else 300
    results: list[dict[str, Any]] = []
    with TemporaryDirectory() as tmp, postgres_database() as postgres:
        backends = {"sqlite": f"sqlite:///{Path(tmp) / 'bench.db'}"}
        if postgres is not None:
            backends["postgresql"] = postgres
        for backend, url in backends.items():
            folder = Path(tmp) / backend
            folder.mkdir()
            samples = cycles(url, folder, pods)
            results.append(
                {
                    "case": "filter+prioritize+bind",
                    "backend": backend,
                    "nodes": NODES,
                    "mode": "names",
                    "samples": len(samples),
                    "cycles_per_s": round(1000.0 * len(samples) / sum(samples), 1),
                    "median_ms": round(median(samples), 3),
                    "p99_ms": round(percentile(samples, 99.0), 3),
                }
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(__doc__ or "", argv)
    results = run(quick=options.quick)
    print_table(
        f"bind cycles, {NODES} nodes x {GPUS} GPUs, test API server",
        ("backend", "cycles/s", "median ms", "p99 ms", "samples"),
        [
            (r["backend"], r["cycles_per_s"], r["median_ms"], r["p99_ms"], r["samples"])
            for r in results
        ],
    )
    write_json(options.json, "bind_throughput", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
