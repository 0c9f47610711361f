"""A quick run of the reconcile latency benchmark: it runs end to end and writes its rows.

A smoke run, not a measurement: the figures are only checked for being there and sane.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import reconcile_latency


def test_reconcile_latency_times_the_pair_idle_and_during_the_reconcile(tmp_path: Path) -> None:
    out = tmp_path / "reconcile.json"

    assert reconcile_latency.main(["--quick", "--json", str(out)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "reconcile_latency"
    rows = {row["case"]: row for row in written["results"]}
    assert sorted(rows) == ["during_reconcile", "idle"]
    (nodes,) = reconcile_latency.QUICK_SIZES
    for row in rows.values():
        assert row["nodes"] == nodes
        assert row["pods"] > nodes  # half the nodes busy on every GPU
        assert row["samples"] >= 10  # a whole pass's worth, at least one client run
        assert 0 < row["median_ms"] <= row["p99_ms"] <= row["max_ms"]
        assert row["reconcile_alone_s"] > 0
    during = rows["during_reconcile"]
    assert rows["idle"]["samples"] == during["samples"]
    # The pairs were timed over at least one whole pass, which changed nothing (the
    # benchmark fails otherwise): the store and the cluster agree.
    assert during["passes"] >= 1 and during["pass_median_s"] > 0
    assert during["p99_ratio"] == round(during["p99_ms"] / rows["idle"]["p99_ms"], 3)
