"""The bind-transaction benchmark: every store and batch size timed, its pods written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bind_transaction as bench


@pytest.mark.postgres
def test_quick_run_times_both_stores_one_pod_and_a_batch(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VGPU_BENCH_POSTGRES_URL", postgres_url)
    out = tmp_path / "transaction.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["store"], r["pods_per_transaction"]) for r in rows] == [
        ("sqlite", 1),
        ("sqlite", bench.BATCH),
        ("postgresql", 1),
        ("postgresql", bench.BATCH),
    ]
    for row in rows:
        assert row["transactions"] == bench.QUICK.transactions * bench.QUICK.rounds
        assert row["cpu_ms_per_transaction"] > 0
        assert row["wall_ms_per_transaction"] > 0
        assert row["cpu_ms_per_pod"] == pytest.approx(
            row["cpu_ms_per_transaction"] / row["pods_per_transaction"]
        )
    for store in ("sqlite", "postgresql"):
        single, batch = (r for r in rows if r["store"] == store)
        # One lock, one read, one commit for the whole batch.
        assert batch["cpu_ms_per_pod"] < single["cpu_ms_per_pod"]


def test_the_pods_of_one_transaction_share_a_node_and_fill_its_gpus_evenly(
    tmp_path: Path,
) -> None:
    engine = bench._engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        write = bench._transactions(engine, bench.BATCH)
        for k in range(2 * bench.NODES):
            write(k)
        with engine.connect() as connection:
            rows = connection.exec_driver_sql(
                "SELECT node, device_uuid, count(*) FROM allocations GROUP BY node, device_uuid"
            ).all()
    finally:
        engine.dispose()
    # Two transactions per node, four pods each: every GPU of every node holds one share.
    assert len(rows) == bench.NODES * bench.GPUS
    assert {count for _, _, count in rows} == {1}
    assert all(uuid.startswith(f"GPU-{int(node[5:])}-") for node, uuid, _ in rows)


def test_more_pods_than_the_store_holds_are_refused_before_the_run(tmp_path: Path) -> None:
    size = bench.Size(transactions=bench.NODES * bench.GPUS * 10, rounds=1, warmup=1)
    with pytest.raises(ValueError, match="do not fit"):
        bench.time_case(f"sqlite:///{tmp_path / 'store.db'}", 1, size)
