"""The memory benchmark's quick run: its rows, and the full-collection pause it times."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import memory as bench


def test_quick_run_measures_each_case_and_the_pause_freezing_removes(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"

    assert bench.main(["--quick", "--json", str(out)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "memory"
    rows = {row["case"]: row for row in written["results"]}
    assert list(rows) == ["imports", "engine", "runtime", "runtime-scraped"]
    assert (rows["runtime"]["nodes"], rows["runtime"]["allocations"]) == (500, 5000)
    assert rows["runtime"]["start_s"] > 0
    # 500 nodes of 8 GPUs, 7 gauge lines each of well over 100 bytes.
    assert rows["runtime-scraped"]["gauges_mb"] > 500 * 8 * 7 * 100 / 1e6
    for row in rows.values():
        assert row["rss_mb"] > 0
        # Every case holds at least the modules' objects, and once they are frozen a
        # full pass walks a small fraction of them (counted, not timed: a timing would
        # depend on the machine's load).
        assert row["tracked_objects"] >= rows["imports"]["tracked_objects"]
        assert row["tracked_after_freeze"] < row["tracked_objects"] / 2
        assert row["full_gc_ms"] > 0 and row["full_gc_frozen_ms"] >= 0
