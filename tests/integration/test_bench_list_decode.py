"""The list-decode benchmark: both decodes timed on both pages, which it checks agree."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import list_decode as bench


def test_quick_run_times_both_pages(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["case"] for r in rows] == ["pods", "pods with managedFields"]
    bare, managed = rows
    assert bare["pods"] == managed["pods"] == bench.LIST_PAGE
    # The managedFields are a good part of what a real server sends.
    assert managed["page_bytes"] > 2 * bare["page_bytes"]
    for row in rows:
        assert 0 < row["plain_median_ms"] <= row["plain_p99_ms"]
        assert 0 < row["decode_page_median_ms"] <= row["decode_page_p99_ms"]


def test_the_real_servers_pages_carry_each_pods_managed_fields() -> None:
    (kept, _), (same, body) = bench.pages().values()
    assert kept == same
    sent = json.loads(body)["items"]
    assert all(len(pod["metadata"]["managedFields"]) == 2 for pod in sent)
    for pod in sent:
        del pod["metadata"]["managedFields"]
    assert sent == kept
