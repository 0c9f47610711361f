"""Where an Ascend node's chips come from: ``npu-smi`` or a static file, behind one backend.

A ``ChipSource`` lists the chips (``scan``); ``AscendBackend`` is the agent's
``DiscoveryBackend`` over a source and the node's chip configuration: it numbers the
chips 0..n-1 in logic-ID order (HAMi's ``index``, not the physical ID), checks they
are still the configured chip, and remembers each chip's physical ID for ``Allocate``.
Health is what the source says at each rescan (``npu-smi``'s Health column, or the
file's ``healthy``), as HAMi's plugin reads health on its registration round.

The static file is YAML (or JSON)::

    chips:
      - uuid: 910b3-die-0a1b2c3d   # the opaque id the scheduler sees
        chip_name: 910B3           # the chip table's chipName
        physical_id: 0             # what ASCEND_VISIBLE_DEVICES names
        logic_id: 0                # optional: the physical ID
        memory_mib: 65536          # optional: the chip's memoryAllocatable
        bus_id: "0000:C1:00.0"     # optional
        healthy: true              # optional; edit it to take a chip out of service
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from device_plugins.ascend.chips import NpuChip, check_chips, join_npu_smi, name_variants
from device_plugins.ascend.npu_smi import NpuSmiError, parse_chip_map, parse_info
from device_plugins.discovery.base import DiscoveryError, HealthSink, PhysicalDevice
from vgpu_extender.vendors.ascend.chips import ChipConfig

#: How long one ``npu-smi`` call may take before discovery gives up.
NPU_SMI_TIMEOUT_S = 30.0

Runner = Callable[[Sequence[str]], str]


class ChipSource(Protocol):
    @property
    def name(self) -> str: ...

    def scan(self) -> tuple[NpuChip, ...]:
        """The node's chips now; raises ``DiscoveryError``."""
        ...


def run_tool(args: Sequence[str], timeout_s: float = NPU_SMI_TIMEOUT_S) -> str:
    """A command's standard output; ``DiscoveryError`` (one line) when it cannot run."""
    command = " ".join(args)
    try:
        done = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise DiscoveryError(
            f"{args[0]!r} not found: install Huawei's driver tools on the node or set "
            "VGPU_DP_ASCEND_NPU_SMI to the npu-smi binary"
        ) from None
    except PermissionError:
        raise DiscoveryError(f"{args[0]!r} cannot be run (permission denied)") from None
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"'{command}' did not answer within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        why = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "")
        raise DiscoveryError(
            f"'{command}' failed with status {done.returncode}: {why or 'no message'}"
        )
    return done.stdout


class NpuSmiSource:
    """Chips from ``npu-smi info`` and ``npu-smi info -m``."""

    name = "npu-smi"

    def __init__(self, node: str, *, binary: str = "npu-smi", run: Runner = run_tool) -> None:
        self._node = node
        self._binary = binary
        self._run = run

    def scan(self) -> tuple[NpuChip, ...]:
        info = self._run([self._binary, "info"])
        chip_map = self._run([self._binary, "info", "-m"])
        try:
            return join_npu_smi(self._node, parse_info(info), parse_chip_map(chip_map))
        except NpuSmiError as exc:
            raise DiscoveryError(f"cannot read npu-smi's output: {exc}") from None


class _ChipEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    uuid: str = Field(min_length=1)
    chip_name: str = Field(min_length=1)
    physical_id: int = Field(ge=0)
    logic_id: int | None = Field(default=None, ge=0)
    memory_mib: int = Field(default=0, ge=0)
    bus_id: str = ""
    healthy: bool = True


class _ChipFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chips: list[_ChipEntry]


def parse_chip_file(data: Any, *, source: str) -> tuple[NpuChip, ...]:
    """Validate a parsed static file (a mapping with ``chips`` or a bare list)."""
    if isinstance(data, list):
        data = {"chips": data}
    try:
        parsed = _ChipFile.model_validate(data)
    except ValidationError as exc:
        parts = [
            f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']} (value {item.get('input')!r})"
            for item in exc.errors()
        ]
        raise DiscoveryError(f"{source}: {'; '.join(parts)}") from None
    chips = tuple(
        NpuChip(
            uuid=entry.uuid,
            chip_name=entry.chip_name,
            physical_id=entry.physical_id,
            logic_id=entry.physical_id if entry.logic_id is None else entry.logic_id,
            memory_mib=entry.memory_mib,
            healthy=entry.healthy,
            bus_id=entry.bus_id,
        )
        for entry in parsed.chips
    )
    try:
        check_chips(chips)
    except DiscoveryError as exc:
        raise DiscoveryError(f"{source}: {exc}") from None
    return tuple(sorted(chips, key=lambda chip: chip.logic_id))


class StaticChipSource:
    """Reads the chip file on every scan."""

    name = "static"

    def __init__(self, path: Path) -> None:
        self._path = path

    def scan(self) -> tuple[NpuChip, ...]:
        try:
            text = self._path.read_text()
        except OSError as exc:
            raise DiscoveryError(f"cannot read the static chip file {self._path}: {exc}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            where = str(exc).replace("\n", " ")
            raise DiscoveryError(f"{self._path}: not valid YAML or JSON: {where}") from None
        return parse_chip_file(data, source=str(self._path))


class AscendBackend:
    """The agent's discovery backend for one configured chip."""

    def __init__(self, source: ChipSource, chip: ChipConfig) -> None:
        self._source = source
        self._chip = chip
        self._lock = threading.Lock()
        self._chips: dict[str, NpuChip] = {}

    @property
    def name(self) -> str:
        return self._source.name

    @property
    def chip(self) -> ChipConfig:
        return self._chip

    def discover(self) -> tuple[PhysicalDevice, ...]:
        chips = self._source.scan()
        wanted = name_variants(self._chip.chip_name)
        for chip in chips:
            if not name_variants(chip.chip_name) & wanted:
                raise DiscoveryError(
                    f"chip {chip.uuid} is a {chip.chip_name!r}, not the {self._chip.chip_name!r} "
                    "this agent serves; restart the agent to serve the new chips"
                )
        word = self._chip.common_word
        devices = tuple(
            PhysicalDevice(
                uuid=chip.uuid,
                index=index,
                model=word,
                memory_mib=chip.memory_mib or self._chip.memory_allocatable,
                bus_id=chip.bus_id,
                healthy=chip.healthy,
                vendor=word,
            )
            for index, chip in enumerate(chips)
        )
        with self._lock:
            self._chips = {chip.uuid: chip for chip in chips}
        return devices

    def chips(self) -> Mapping[str, NpuChip]:
        """The chips of the last ``discover``, by ``uuid``."""
        with self._lock:
            return dict(self._chips)

    def watch_health(self, stop: threading.Event, emit: HealthSink) -> None:
        # Health arrives with each rescan (the source's own health column).
        stop.wait()

    def close(self) -> None:
        return None
