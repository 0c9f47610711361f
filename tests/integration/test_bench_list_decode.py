"""The list-decode benchmark: both decodes timed on both pages, which it checks agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import list_decode as bench


def test_quick_run_times_every_page_whole_and_paced(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["case"] for r in rows] == ["pods", "pods with managedFields", "nodes"]
    bare, managed, nodes = rows
    assert bare["objects"] == managed["objects"] == nodes["objects"] == bench.LIST_PAGE
    # The managedFields are a good part of what a real server sends.
    assert managed["page_bytes"] > 2 * bare["page_bytes"]
    for row in rows:
        assert 0 < row["plain_median_ms"] <= row["plain_p99_ms"]
        assert 0 < row["decode_page_median_ms"] <= row["decode_page_p99_ms"]
        # Paced, the page is cut: no step of it is the whole decode.
        assert 0 < row["paced_longest_step_ms"] < row["paced_median_ms"]


def test_the_longest_step_is_the_longest_stretch_between_paces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([10.0, 10.5, 12.5, 13.0])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    steps = bench.Steps()  # reads 10.0

    for _ in range(3):
        steps()

    assert steps.longest == 2.0


def test_the_real_servers_pages_carry_each_pods_managed_fields() -> None:
    (kept, _), (same, body), _nodes = bench.pages().values()
    assert kept == same
    sent = json.loads(body)["items"]
    assert all(len(pod["metadata"]["managedFields"]) == 2 for pod in sent)
    for pod in sent:
        del pod["metadata"]["managedFields"]
    assert sent == kept
