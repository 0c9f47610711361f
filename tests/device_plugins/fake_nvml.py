"""A stand-in for the ``pynvml`` module, fed from plain values.

It implements the calls the NVML backend makes, with pynvml's names, error classes
and event struct shape, so the backend runs here exactly as on a GPU node.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

MIB = 1024 * 1024


class NVMLError(Exception):
    def __init__(self, value: int = 999) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class NVMLError_NotSupported(NVMLError):  # noqa: N801, N818 - pynvml's name
    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_Timeout(NVMLError):  # noqa: N801, N818
    def __init__(self) -> None:
        super().__init__(10)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801, N818
    def __init__(self) -> None:
        super().__init__(12)


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801, N818
    def __init__(self) -> None:
        super().__init__(13)


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801, N818
    def __init__(self) -> None:
        super().__init__(15)


@dataclass
class FakeGpu:
    uuid: str
    index: int
    name: str = "Tesla V100-PCIE-32GB"
    memory_mib: int | None = 32768
    bus_id: str = "00000000:3B:00.0"
    mig: bool | None = None  # None: MIG not supported
    event_types: int = 0x8 | 0x2 | 0x1
    register_error: NVMLError | None = None


@dataclass
class FakePynvml:
    """``pynvml`` with ``gpus``; ``events`` holds what ``nvmlEventSetWait_v2`` returns."""

    gpus: list[FakeGpu]
    init_error: NVMLError | None = None
    events: queue.Queue[Any] = field(default_factory=queue.Queue)
    calls: list[str] = field(default_factory=list)
    registered: dict[str, int] = field(default_factory=dict)
    init_count: int = 0
    freed: bool = False

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise self.init_error
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")
        self.init_count -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        if not isinstance(handle, FakeGpu):
            raise NVMLError(2)
        return handle.uuid

    def nvmlDeviceGetIndex(self, handle: FakeGpu) -> int:
        return handle.index

    def nvmlDeviceGetName(self, handle: FakeGpu) -> bytes:
        return handle.name.encode()  # old pynvml releases answer bytes

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> SimpleNamespace:
        if handle.memory_mib is None:
            raise NVMLError_NotSupported()
        total = handle.memory_mib * MIB
        return SimpleNamespace(total=total, free=total, used=0)

    def nvmlDeviceGetPciInfo(self, handle: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(busId=handle.bus_id)

    def nvmlDeviceGetMigMode(self, handle: FakeGpu) -> list[int]:
        if handle.mig is None:
            raise NVMLError_NotSupported()
        return [int(handle.mig), int(handle.mig)]

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.freed = True

    def nvmlDeviceGetSupportedEventTypes(self, handle: FakeGpu) -> int:
        return handle.event_types

    def nvmlDeviceRegisterEvents(self, handle: FakeGpu, mask: int, event_set: str) -> None:
        if handle.register_error is not None:
            raise handle.register_error
        self.registered[handle.uuid] = mask

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Any:
        try:
            item = self.events.get(timeout=min(timeout_ms / 1000, 0.02))
        except queue.Empty:
            raise NVMLError_Timeout() from None
        if isinstance(item, Exception):
            raise item
        return item

    # helpers for tests
    def xid(self, gpu: FakeGpu | str, xid: int, event_type: int = 0x8) -> None:
        self.events.put(SimpleNamespace(device=gpu, eventType=event_type, eventData=xid))
