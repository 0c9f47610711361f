"""Huawei's ``npu-smi`` text, read: the ``info`` table and the ``info -m`` chip map.

``npu-smi info`` prints one block per NPU (card) between ``+====+`` rules: a first row
``| <NPU id> <name> | <health> | power, temperature, hugepages |`` and then one row per
chip ``| <chip id> [<device id>] | <bus id> | AICore(%) <used> / <total> [<used> / <total>] |``.
The last ``used / total`` pair of a chip row is its device memory (``HBM-Usage`` on 910
chips, ``Memory-Usage`` on 310P). The process table that follows (``Process id``) is
not read. ``npu-smi info -m`` lists ``NPU ID, Chip ID, Chip Logic ID, Chip Name``; rows
without a logic ID (``-``, the board's ``Mcu``) are not NPUs.

Pure text in, records out: running the tool is ``discovery``'s job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class NpuSmiError(ValueError):
    """The text is not ``npu-smi`` output of the expected layout; the message says why."""


@dataclass(frozen=True, slots=True)
class InfoChip:
    """One chip of ``npu-smi info``. ``device_id`` is the ``Device`` column, when printed."""

    npu_id: int
    chip_id: int
    name: str
    health: str
    bus_id: str
    memory_used_mib: int
    memory_total_mib: int
    device_id: int | None = None

    @property
    def healthy(self) -> bool:
        # HAMi's plugin takes DCMI health 0 only; npu-smi prints it as OK.
        return self.health.upper() == "OK"


@dataclass(frozen=True, slots=True)
class MapChip:
    """One NPU row of ``npu-smi info -m``."""

    npu_id: int
    chip_id: int
    logic_id: int
    chip_name: str


_NPU_ROW = re.compile(r"^(\d+)\s+(\S+)$")
_CHIP_ROW = re.compile(r"^(\d+)(?:\s+(\d+))?$")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_MAP_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+|-)\s+(\S.*?)\s*$")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _excerpt(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return repr(first[:80])


def parse_info(text: str) -> tuple[InfoChip, ...]:
    """Every chip of the ``npu-smi info`` table, in printed order."""
    chips: list[InfoChip] = []
    npu: tuple[int, str, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("+="):
            npu = None  # a block ends: the next chip rows need their NPU row first
            continue
        if not stripped.startswith("|"):
            continue
        cells = _cells(line)
        if any(cell.startswith("Process id") for cell in cells):
            break  # the process table: nothing more about the chips
        if len(cells) < 3:
            continue
        head = _NPU_ROW.match(cells[0])
        if head and not _BUS_ID.match(cells[1]):
            npu = (int(head.group(1)), head.group(2), cells[1])
            continue
        row = _CHIP_ROW.match(cells[0])
        if row is None or not _BUS_ID.match(cells[1]):
            continue  # a header row
        if npu is None:
            raise NpuSmiError(f"line {number}: a chip row before its NPU row: {line.strip()!r}")
        pairs = _PAIR.findall(cells[2])
        if not pairs:
            raise NpuSmiError(f"line {number}: no '<used> / <total>' memory: {line.strip()!r}")
        used, total = (int(value) for value in pairs[-1])
        device = row.group(2)
        chips.append(
            InfoChip(
                npu_id=npu[0],
                chip_id=int(row.group(1)),
                name=npu[1],
                health=npu[2],
                bus_id=cells[1],
                memory_used_mib=used,
                memory_total_mib=total,
                device_id=None if device is None else int(device),
            )
        )
    if not chips:
        raise NpuSmiError(
            f"no NPU chip rows in the 'npu-smi info' table (it starts {_excerpt(text)})"
        )
    return tuple(chips)


def parse_chip_map(text: str) -> tuple[MapChip, ...]:
    """The NPU rows of ``npu-smi info -m`` (those with a chip logic ID)."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if "Chip Logic ID" in line), None)
    if header is None:
        raise NpuSmiError(
            "no 'Chip Logic ID' header in the 'npu-smi info -m' output "
            f"(it starts {_excerpt(text)})"
        )
    chips: list[MapChip] = []
    for number, line in enumerate(lines[header + 1 :], start=header + 2):
        if not line.strip():
            continue
        row = _MAP_ROW.match(line)
        if row is None:
            raise NpuSmiError(f"line {number} of 'npu-smi info -m' is not a chip row: {line!r}")
        if row.group(3) == "-":
            continue  # the board's MCU, not an NPU
        chips.append(MapChip(int(row.group(1)), int(row.group(2)), int(row.group(3)), row.group(4)))
    if not chips:
        raise NpuSmiError("'npu-smi info -m' lists no chip with a logic ID")
    return tuple(chips)
