"""The Alibaba openb GPU trace: node and pod lists, read as the FGD artifact reads them.

Spec: fgd.md §2-§3. Pods carry host CPU (milli) and memory (MiB), a GPU count and a
per-GPU share in thousandths (milli) of one GPU: ``gpu_milli`` if it lies in (0, 1000],
1000 above that, 0 otherwise. A pod whose share is 0 asks for no GPU at all. The allowed
GPU models are ``gpu_spec`` split on ``|`` (empty: any model).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: Thousandths of one GPU.
GPU_MILLI = 1000

_POD_LIST_PREFIX = "openb_pod_list_"


class TraceError(ValueError):
    """A trace file cannot be read: names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    models: tuple[str, ...] = ()

    @property
    def wants_gpu(self) -> bool:
        return self.num_gpu > 0 and self.gpu_milli > 0

    @property
    def gpu_request(self) -> int:
        """GPU milli the pod asks for in all (what "arrived" counts)."""
        return self.num_gpu * self.gpu_milli if self.wants_gpu else 0

    @property
    def sharing(self) -> bool:
        """One GPU, less than all of it."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < GPU_MILLI


def trace_name(pods_csv: Path) -> str:
    """``openb_pod_list_default.csv`` -> ``default``."""
    stem = pods_csv.name.split(".", 1)[0]
    return stem.removeprefix(_POD_LIST_PREFIX)


def per_gpu_milli(raw: int) -> int:
    """The artifact's reading of ``gpu_milli``."""
    if raw > GPU_MILLI:
        return GPU_MILLI
    return raw if raw > 0 else 0


def read_nodes(path: Path) -> list[TraceNode]:
    return [
        TraceNode(
            name=_text(row, "sn", path, line),
            cpu_milli=_int(row, "cpu_milli", path, line),
            memory_mib=_int(row, "memory_mib", path, line),
            gpus=_int(row, "gpu", path, line),
            model=_text(row, "model", path, line),
        )
        for line, row in _rows(path)
    ]


def read_pods(path: Path) -> list[TracePod]:
    pods: list[TracePod] = []
    for line, row in _rows(path):
        spec = (row.get("gpu_spec") or "").strip()
        pods.append(
            TracePod(
                name=_text(row, "name", path, line),
                cpu_milli=_int(row, "cpu_milli", path, line),
                memory_mib=_int(row, "memory_mib", path, line),
                num_gpu=_int(row, "num_gpu", path, line),
                gpu_milli=per_gpu_milli(_int(row, "gpu_milli", path, line)),
                # As written (a model may repeat): FGD's typical pods key on the spec text.
                models=tuple(m for m in spec.split("|") if m),
            )
        )
    return pods


def _rows(path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="") as handle:
            yield from enumerate(csv.DictReader(handle), start=2)
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None


def _text(row: dict[str, str], key: str, path: Path, line: int) -> str:
    value = row.get(key)
    if value is None or not value.strip():
        raise TraceError(f"{path}:{line}: field {key!r} is missing or empty")
    return value.strip()


def _int(row: dict[str, str], key: str, path: Path, line: int) -> int:
    value = _text(row, key, path, line)
    try:
        return int(value)
    except ValueError:
        raise TraceError(f"{path}:{line}: field {key!r} is not an integer: {value!r}") from None
