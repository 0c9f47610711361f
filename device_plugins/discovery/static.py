"""Devices listed in a file, for nodes without NVML and for demonstrations.

The file is YAML (or JSON, which YAML reads too)::

    devices:
      - uuid: GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448
        index: 0
        model: Tesla V100-PCIE-32GB
        memory_mib: 32768
        numa: 0            # optional
        healthy: true      # optional; edit it to take a device out of service

The file is read again on every rescan, so editing ``healthy`` is how an operator
takes a device in or out of service without restarting the agent.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from device_plugins.discovery.base import (
    MODE_SHARED,
    DiscoveryError,
    HealthSink,
    PhysicalDevice,
)


class _DeviceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)

    uuid: str = Field(min_length=1)
    index: int = Field(ge=0)
    model: str = Field(min_length=1)
    memory_mib: int = Field(gt=0)
    numa: int | None = Field(default=None, ge=0)
    bus_id: str = ""
    mode: str = MODE_SHARED
    healthy: bool = True
    vendor: str = "NVIDIA"


class _DeviceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    devices: list[_DeviceEntry]


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']} (value {item.get('input')!r})")
    return "; ".join(parts)


def parse_devices(data: Any, *, source: str) -> tuple[PhysicalDevice, ...]:
    """Validate a parsed document (a mapping with ``devices`` or a bare list)."""
    if isinstance(data, list):
        data = {"devices": data}
    try:
        parsed = _DeviceFile.model_validate(data)
    except ValidationError as exc:
        raise DiscoveryError(f"{source}: {_describe(exc)}") from exc
    seen_uuids: set[str] = set()
    seen_indexes: set[int] = set()
    devices = []
    for position, entry in enumerate(parsed.devices):
        if entry.uuid in seen_uuids:
            raise DiscoveryError(f"{source}: devices.{position}.uuid {entry.uuid!r} is repeated")
        if entry.index in seen_indexes:
            raise DiscoveryError(f"{source}: devices.{position}.index {entry.index} is repeated")
        seen_uuids.add(entry.uuid)
        seen_indexes.add(entry.index)
        try:
            devices.append(PhysicalDevice(**entry.model_dump()))
        except DiscoveryError as exc:
            raise DiscoveryError(f"{source}: devices.{position}: {exc}") from exc
    return tuple(sorted(devices, key=lambda d: d.index))


class StaticBackend:
    """Reads the device file on every ``discover``; reports no events of its own."""

    name = "static"

    def __init__(self, path: Path) -> None:
        self._path = path

    def discover(self) -> tuple[PhysicalDevice, ...]:
        try:
            text = self._path.read_text()
        except OSError as exc:
            raise DiscoveryError(f"cannot read the static device file {self._path}: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise DiscoveryError(f"{self._path}: not valid YAML or JSON: {exc}") from exc
        return parse_devices(data, source=str(self._path))

    def watch_health(self, stop: threading.Event, emit: HealthSink) -> None:
        # Health changes arrive through the file itself, at the next rescan.
        stop.wait()

    def close(self) -> None:
        return None
