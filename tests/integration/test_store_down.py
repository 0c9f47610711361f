"""Honest answers while the store cannot be reached, on a real PostgreSQL server.

The extender runs on a database of its own; the test takes it away mid-run (every
session ended, new ones refused: ``ALLOW_CONNECTIONS false``), then gives it back.
While it is gone: admin reads answer 503 naming the reason, ``/metrics`` still renders
from memory, ``/readyz`` fails once the failures add up, a bind answers HTTP 200 with
``store unavailable: ...``, and the log has a line per kind of failure, no traceback.
Once it is back, readiness returns and the same bind goes through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    place,
    pod_json,
)
from tests.support.waiting import eventually, until_bound
from vgpu_extender.api import store_errors
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.log_throttle import ThrottledLog
from vgpu_extender.services import sync
from vgpu_extender.services.store_health import StoreHealth

pytestmark = pytest.mark.postgres

TOKEN = "store-down-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
INVENTORY = {
    "nodes": [
        {
            "name": "gpu-1",
            "devices": [
                {
                    "id": "GPU-1",
                    "index": 0,
                    "count": 10,
                    "devmem": 16384,
                    "devcore": 100,
                    "type": "NVIDIA-Tesla T4",
                    "mode": "hami-core",
                    "health": True,
                }
            ],
        }
    ]
}
#: Requests sent while the store is gone: enough that a line each would show.
ROUNDS = 40


@dataclass
class Outage:
    """Takes the database away from every client, and gives it back."""

    admin: Engine
    database: str

    def begin(self) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS false'))
            connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": self.database},
            )

    def end(self) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS true'))


#: The throttles' interval in these tests: longer than any outage phase, so that the
#: counts of log lines asserted hold however slowly the machine runs.
LONG_INTERVAL_S = 3600.0


@pytest.fixture(autouse=True)
def long_throttle_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every throttled log of the extender at ``LONG_INTERVAL_S``: the ones made while
    the test runs (their defaults) and the module-level ones (new, so no line an earlier
    test wrote holds back the first one here)."""
    monkeypatch.setitem(ThrottledLog.__init__.__kwdefaults__, "interval_s", LONG_INTERVAL_S)
    monkeypatch.setitem(StoreHealth.__init__.__kwdefaults__, "log_interval_s", LONG_INTERVAL_S)
    monkeypatch.setattr(
        sync, "_unavailable_log", ThrottledLog(sync.logger, interval_s=LONG_INTERVAL_S)
    )
    monkeypatch.setattr(
        store_errors, "_FALLBACK", ThrottledLog(store_errors.logger, interval_s=LONG_INTERVAL_S)
    )


@pytest.fixture
def outage(postgres_url: str, fresh_postgres: str) -> Iterator[Outage]:
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    database = make_url(fresh_postgres).database
    assert database is not None
    try:
        yield Outage(admin, database)
    finally:
        Outage(admin, database).end()  # before the database is dropped
        admin.dispose()


def _ready(running: RunningExtender) -> tuple[int, dict[str, Any]]:
    response = running.client.get("/readyz")
    return response.status_code, response.json()


def _store_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_store_outage_is_answered_honestly_and_survived(
    extender: StartExtender,
    fresh_postgres: str,
    outage: Outage,
    caplog: pytest.LogCaptureFixture,
) -> None:
    running = extender(
        database_url=fresh_postgres,
        admin_token=TOKEN,
        store_probe_interval_s=0.1,
        store_unready_after=2,
        store_ready_after=3,
    )
    assert running.client.put("/api/v1/inventory", json=INVENTORY, headers=AUTH).status_code == 200
    held = pod_json("held", mem=4000)
    place(running, held, "gpu-1")
    assert _ready(running)[0] == 200
    assert 'pod="held"' in running.client.get("/metrics", headers=AUTH).text

    caplog.clear()
    caplog.set_level(logging.WARNING)
    outage.begin()

    for _ in range(ROUNDS):
        for path in ("/api/v1/allocations", "/api/v1/pods/default/held", "/api/v1/nodes"):
            response = running.client.get(path, headers=AUTH)
            assert response.status_code == 503, (path, response.text)
            detail = response.json()["detail"]
            assert detail.startswith("store unavailable: "), detail
            assert "Traceback" not in response.text
            assert response.headers["retry-after"].isdigit()

    eventually(lambda: _ready(running)[0] == 503, "readiness failing while the store is gone")
    status, body = _ready(running)
    assert status == 503
    assert body["checks"]["store"]["ok"] is False
    assert "unreachable since" in body["checks"]["store"]["detail"]
    assert body["checks"]["index"]["ok"] is True  # only the store check fails

    scrape = running.client.get("/metrics", headers=AUTH)
    assert scrape.status_code == 200
    assert "vgpu_extender_store_available 0.0" in scrape.text
    assert 'hami_gpu_memory_allocated_bytes{device_cores="100",device_index="0"' in scrape.text
    assert 'pod="held"' in scrape.text  # the pods' gauges from the last rows read

    late = pod_json("late", mem=2000)
    running.verb("/filter", args(late, ["gpu-1"]))
    for _ in range(ROUNDS // 4):
        answer = running.verb("/bind", bind_args(late, "gpu-1"))
        assert "store unavailable: " in answer["Error"], answer
        assert "internal error" not in answer["Error"]

    records = _store_records(caplog)
    assert all(r.exc_info is None and r.exc_text is None for r in records), [
        r.getMessage() for r in records if r.exc_info
    ]
    assert not any("Traceback" in r.getMessage() for r in records)
    # 130 failed requests and ~10 failed probes: one line per kind per interval, and
    # the line saying readiness fails.
    assert 1 <= len(records) <= 4, [r.getMessage() for r in records]

    outage.end()
    eventually(lambda: _ready(running)[0] == 200, "readiness back once the store answers")
    assert running.client.get("/api/v1/allocations", headers=AUTH).json()["total"] == 1
    running.verb("/filter", args(late, ["gpu-1"]))
    assert running.verb("/bind", bind_args(late, "gpu-1")) == {"Error": ""}
    assert running.client.get("/api/v1/allocations", headers=AUTH).json()["total"] == 2


def test_with_a_cluster_the_background_work_logs_a_line_per_kind_during_an_outage(
    extender: StartExtender,
    fresh_postgres: str,
    outage: Outage,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pod events and reconcile passes fail alike while the store is gone: the log says
    so once per kind, the binds say ``store unavailable``, and once the store is back
    the reconcile releases what the deleted pods held."""
    apiserver.add_node(node_json("gpu-1", gpus=2, mem=16384))
    pods = [pod_json(f"p{i}", mem=1000) for i in range(12)]
    for pod in pods:
        apiserver.add_pod(pod)
    running = extender(
        kube=real_kube,
        database_url=fresh_postgres,
        admin_token=TOKEN,
        reconcile_interval_s=0.2,
        store_probe_interval_s=0.1,
    )
    eventually(lambda: "gpu-1" in running.runtime.cluster.index, "the node watch's first list")
    for pod in pods[:8]:
        place(running, pod, "gpu-1")
    for pod in pods[:8]:
        until_bound(running, pod["metadata"]["uid"])

    caplog.clear()
    caplog.set_level(logging.WARNING)
    outage.begin()
    for pod in pods[8:]:
        running.verb("/filter", args(pod, ["gpu-1"]))
        assert "store unavailable: " in running.verb("/bind", bind_args(pod, "gpu-1"))["Error"]
    for pod in pods[:8]:
        apiserver.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
    eventually(lambda: _ready(running)[0] == 503, "readiness failing while the store is gone")
    eventually(
        lambda: any(r.name == "vgpu_extender.services.sync" for r in caplog.records),
        "the pod events or a reconcile pass failing for want of the store",
    )
    time.sleep(1.0)  # some 5 reconcile passes fail meanwhile; nothing timed is asserted

    records = _store_records(caplog)
    assert all(r.exc_info is None for r in records), [r.getMessage() for r in records]
    from_sync = [r for r in records if r.name == "vgpu_extender.services.sync"]
    # 8 pod events and ~5 reconcile passes failed: a line per kind per interval.
    assert 1 <= len(from_sync) <= 2, [r.getMessage() for r in from_sync]

    outage.end()
    eventually(lambda: _ready(running)[0] == 200, "readiness back once the store answers")
    eventually(
        lambda: running.client.get("/api/v1/allocations", headers=AUTH).json()["total"] == 0,
        "the deleted pods' allocations released by the reconcile",
    )
