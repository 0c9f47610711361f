"""Gauge samples in Prometheus' text format (0.0.4), byte for byte as prometheus_client
writes them: labels sorted by name, values escaped, numbers as Go prints them.

For the per-GPU and per-pod gauges, hundreds of thousands of lines at 10,000 nodes:
built through ``generate_latest`` they cost about 18 µs a line (six seconds a scrape at
5,000 nodes, ``benchmarks/metrics_scrape``), most of it spent checking and escaping the
same label names again for every line. Here a label set is formatted once and the lines
of a node are kept until the node changes (``metrics.AllocationGauges``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client.utils import floatToGoString

#: prometheus_client's own number format (Go's: exponents past a million), typed.
go_float: Callable[[float], str] = floatToGoString


def header(name: str, documentation: str) -> str:
    """A gauge family's ``# HELP`` and ``# TYPE`` lines."""
    escaped = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {escaped}\n# TYPE {name} gauge\n"


def escape_value(value: str) -> str:
    """A label value as it stands between double quotes."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_set(labels: Mapping[str, str]) -> str:
    """``{name="value",...}``, the names sorted; names must be valid Prometheus label
    names (they are the code's own)."""
    inner = ",".join(f'{name}="{escape_value(labels[name])}"' for name in sorted(labels))
    return "{" + inner + "}"


def sample(name: str, labels: str, value: float) -> str:
    """One sample's line, ``labels`` as ``label_set`` made them."""
    return f"{name}{labels} {go_float(value)}\n"
