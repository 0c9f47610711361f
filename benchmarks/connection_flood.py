"""kube-scheduler's filter latency while hostile clients hold the extender's connections.

The extender runs as ``serve`` does, with an open-file limit of 1,024 and 2 s header and
body timeouts (``tests.support.limited_extender``). It is timed twice, on one keep-alive
connection from 127.0.0.1 sending a filter every 30 ms, as kube-scheduler would:

- ``quiet``: nothing else connects;
- ``flood``: 1,100 silent clients (they connect and send nothing) and 100 slowloris ones
  (a header byte a second) from other loopback addresses, each connecting again whenever
  the server closes it (``tests.support.connection_flood``, at a lower CPU priority).

Filters go in windows of 100 (about 3 s each); the table gives the p50 and p99 over all
of them, the best and the worst window's p99, and how many failed (any error fails). Goal:
filter p99 under 10 ms under the flood, no error.

Run: ``python -m benchmarks.connection_flood [--windows N] [--json PATH] [--quick]``.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import argument_parser, cpu_gauge_ms, percentile, print_table, write_json
from benchmarks.lean_http import LeanConnection
from tests.support.limited_extender import filter_body, port_of, spawn_limited, start_flood

WINDOW = 100
PAUSE_S = 0.03


def _window(url: str, body: bytes, failures: list[str]) -> list[float]:
    """``WINDOW`` filters on a connection opened for the window; each one's milliseconds."""
    latencies: list[float] = []
    connection = LeanConnection(url, timeout_s=5.0)
    try:
        for index in range(WINDOW):
            started = time.perf_counter_ns()
            try:
                status, answer = connection.post("/filter", body)
            except OSError as exc:
                failures.append(f"request {index}: {exc!r}")
                connection.close()
                connection = LeanConnection(url, timeout_s=5.0)
                continue
            latencies.append((time.perf_counter_ns() - started) / 1e6)
            if status != 200 or json.loads(answer)["Error"] != "":
                failures.append(f"request {index}: {status} {answer[:200]!r}")
            time.sleep(PAUSE_S)
    finally:
        connection.close()
    return latencies


def _scenario(name: str, url: str, windows: int) -> dict[str, Any]:
    body = filter_body()
    failures: list[str] = []
    per_window = [_window(url, body, failures) for _ in range(windows)]
    every = [ms for window in per_window for ms in window]
    p99s = [percentile(window, 99.0) for window in per_window if window]
    return {
        "scenario": name,
        "filters": len(every) + len(failures),
        "failed": len(failures),
        "p50_ms": round(percentile(every, 50.0), 3),
        "p99_ms": round(percentile(every, 99.0), 3),
        "best_window_p99_ms": round(min(p99s), 3),
        "worst_window_p99_ms": round(max(p99s), 3),
        "first_failures": failures[:5],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser(__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--windows", type=int, default=5, help="windows of 100 filters each")
    options = parser.parse_args(argv)
    windows = 2 if options.quick else options.windows
    gauge = cpu_gauge_ms()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        extender = spawn_limited(Path(tmp))
        try:
            url = extender.url
            results.append(_scenario("quiet", url, windows))
            with (Path(tmp) / "flood.err").open("w") as errors:
                flood = start_flood(
                    port_of(extender), silent=1100, slowloris=100, duration_s=3600, errors=errors
                )
                try:
                    results.append(_scenario("flood", url, windows))
                finally:
                    flood.send_signal(signal.SIGTERM)
                    out, _ = flood.communicate(timeout=30)
            seen = json.loads(out.strip().splitlines()[-1])
            results[-1]["hostile_clients"] = seen
        finally:
            extender.stop()
    for row in results:
        row["cpu_gauge_ms"] = gauge
    columns = ["scenario", "filters", "failed", "p50 ms", "p99 ms", "best window p99"]
    columns += ["worst window p99", "cpu gauge ms"]
    rows = [
        [
            r["scenario"],
            r["filters"],
            r["failed"],
            r["p50_ms"],
            r["p99_ms"],
            r["best_window_p99_ms"],
            r["worst_window_p99_ms"],
            gauge,
        ]
        for r in results
    ]
    print_table("filter latency from 127.0.0.1 under a connection flood", columns, rows)
    write_json(options.json, "connection_flood", results)


if __name__ == "__main__":
    main()
