"""A quick run of the metrics scrape benchmark: it runs end to end and writes its rows.

A smoke run, not a measurement: the figures are only checked for being there and sane,
and the scraped text for parsing as Prometheus' text format.
"""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from benchmarks import metrics_scrape
from benchmarks.engine_fit import GPUS

#: HAMi's gauges with one sample per GPU (``hami_node_gpu_memory_allocated_ratio`` too,
#: for every GPU with memory).
DEVICE_GAUGES = 7


def test_metrics_scrape_times_the_scrapes_and_the_pair_idle_and_during_them(
    tmp_path: Path,
) -> None:
    out = tmp_path / "scrape.json"
    bodies = tmp_path / "bodies"

    assert metrics_scrape.main(["--quick", "--json", str(out), "--bodies", str(bodies)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "metrics_scrape"
    rows = {row["case"]: row for row in written["results"]}
    assert sorted(rows) == ["during_scrapes", "idle", "scrape_first", "scrape_repeat"]
    (nodes,) = metrics_scrape.QUICK_SIZES
    for row in rows.values():
        assert row["nodes"] == nodes
        assert row["pods"] > nodes  # half the nodes busy on every GPU
        assert row["cpu_gauge_ms"] > 0
    for case in ("scrape_first", "scrape_repeat"):
        scrape = rows[case]
        assert scrape["wall_s"] > 0 and scrape["cpu_s"] > 0
        assert scrape["bytes"] > 0 and 0 < scrape["wire_bytes"] <= scrape["bytes"]
        assert scrape["sample_lines"] >= nodes * GPUS * DEVICE_GAUGES
    assert rows["scrape_first"]["samples"] == 1
    assert rows["scrape_repeat"]["samples"] == metrics_scrape.QUICK_REPEATS
    for case in ("idle", "during_scrapes"):
        pairs = rows[case]
        assert pairs["samples"] >= 10  # at least one client run
        assert 0 < pairs["median_ms"] <= pairs["p99_ms"] <= pairs["max_ms"]
    during = rows["during_scrapes"]
    assert rows["idle"]["samples"] == during["samples"]
    assert during["scrapes"] >= 1 and during["scrape_median_s"] > 0
    assert during["p99_ratio"] == round(during["p99_ms"] / rows["idle"]["p99_ms"], 3)

    # The last scrape's text is Prometheus' text format, one sample a line as counted,
    # with HAMi's per-GPU gauge for every GPU of the cluster.
    text = (bodies / f"metrics-{nodes}.txt").read_text()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    samples = sum(len(family.samples) for family in families.values())
    assert samples == rows["scrape_repeat"]["sample_lines"]
    limits = families["hami_gpu_memory_limit_bytes"].samples
    assert len(limits) == nodes * GPUS
    assert len({sample.labels["node"] for sample in limits}) == nodes
