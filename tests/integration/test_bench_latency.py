"""Quick runs of the latency benchmarks: they run end to end and write their rows.

Smoke runs, not measurements: the figures are only checked for being there and sane.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import engine_fit, extender_latency


def test_extender_latency_times_every_verb_and_mode_over_http(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"

    assert extender_latency.main(["--quick", "--json", str(out)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "extender_latency"
    rows = [r for r in written["results"] if r["case"] != "first_filter"]
    keys = sorted((r["nodes"], r["mode"], r["case"]) for r in rows)
    assert keys == sorted(
        (nodes, mode, case)
        for nodes in (100, 1_000)
        for mode in ("names", "nodes")
        for case in ("filter", "prioritize", "floor")
    )
    for row in rows:
        assert 0 < row["median_ms"] <= row["p99_ms"]
        assert row["samples"] == 5
        assert row["policy"] == "binpack"  # the extender's default node policy
    # The first nodes-mode filter of a fresh extender, every node new to it: answered,
    # and every node in the store afterwards.
    (first,) = [r for r in written["results"] if r["case"] == "first_filter"]
    assert (first["nodes"], first["mode"], first["backend"]) == (1_000, "nodes", "sqlite")
    assert first["samples"] == 1 and first["median_ms"] > 0
    assert first["stored_nodes_after"] == 1_000
    for row in (r for r in rows if r["case"] == "filter"):
        # Each filter row also times both verbs back to back, over HTTP and in process.
        # Only their presence is checked: which is faster in five quick samples depends
        # on the machine's load, and the benchmark, not this test, measures it.
        assert 0 < row["filter_prioritize_median_ms"] <= row["filter_prioritize_p99_ms"]
        assert row["in_process_filter_prioritize_median_ms"] > 0


def test_extender_latency_serves_the_node_policy_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"

    argv = ["--quick", "--nodes", "100", "--no-first", "--policy", "sum-squares"]
    assert extender_latency.main([*argv, "--json", str(out)]) == 0

    rows = json.loads(out.read_text())["results"]
    assert {(r["case"], r["mode"]) for r in rows} == {
        (case, mode) for case in ("filter", "prioritize", "floor") for mode in ("names", "nodes")
    }
    assert {r["policy"] for r in rows} == {"sum-squares"}
    # A policy the extender does not serve is refused before anything starts.
    with pytest.raises(SystemExit) as refused:
        extender_latency.main([*argv[:-1], "no-such-policy"])
    assert refused.value.code == 2


def test_engine_fit_times_each_case_next_to_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "engine.json"

    assert engine_fit.main(["--quick", "--json", str(out)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "engine_fit"
    rows = written["results"]
    assert sorted((r["case"], r["nodes"]) for r in rows) == sorted(
        (case, nodes)
        for case in (*engine_fit.CASES, *engine_fit.ASCEND_CASES)
        for nodes in engine_fit.QUICK_SIZES
    )
    for row in rows:
        assert 0 < row["median_ms"] <= row["p99_ms"]
        assert row["reference_median_ms"] > 0
        assert row["feasible"] + row["rejected"] == row["nodes"]
