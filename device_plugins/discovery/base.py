"""What every discovery backend gives the agent, whatever the vendor.

A backend answers two questions: which devices does this node have (``discover``),
and did one of them just fail (``watch_health``). Everything vendor-specific (NVML,
a static file, Huawei's DCMI, Cambricon's CNDev, Hygon's DCGM) stays behind this
seam; the agent, the kubelet server and the node annotation only see
``PhysicalDevice`` and ``HealthEvent``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

MODE_SHARED = "hami-core"
MODE_MIG = "mig"
MODES = (MODE_SHARED, MODE_MIG, "mps")
#: Kubelet takes device IDs of at most 63 characters and we append ``-<replica>``
#: (up to ``-999``), so a UUID may have at most 59.
MAX_UUID_LENGTH = 59


class DiscoveryError(RuntimeError):
    """Devices could not be discovered; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class PhysicalDevice:
    """One physical accelerator as the hardware reports it, before any splitting.

    ``model`` is the vendor's own name ("Tesla V100-PCIE-32GB"); ``memory_mib`` the
    real total, unscaled. ``numa`` is None when the node has no NUMA information for
    the device. ``healthy`` is what discovery itself saw; failures reported later by
    ``watch_health`` are kept separately by the agent.
    """

    uuid: str
    index: int
    model: str
    memory_mib: int
    numa: int | None = None
    bus_id: str = ""
    mode: str = MODE_SHARED
    healthy: bool = True
    vendor: str = "NVIDIA"

    def __post_init__(self) -> None:
        if not self.uuid or any(ch in self.uuid for ch in ",:;"):
            raise DiscoveryError(f"device uuid {self.uuid!r} is empty or contains , : or ;")
        if len(self.uuid) > MAX_UUID_LENGTH:
            raise DiscoveryError(
                f"device uuid {self.uuid!r} is longer than {MAX_UUID_LENGTH} characters"
            )
        if self.index < 0:
            raise DiscoveryError(f"device {self.uuid}: index must be >= 0, got {self.index}")
        if self.memory_mib <= 0:
            raise DiscoveryError(
                f"device {self.uuid}: memory_mib must be positive, got {self.memory_mib}"
            )
        if self.mode not in MODES:
            raise DiscoveryError(
                f"device {self.uuid}: mode must be one of {MODES}, got {self.mode!r}"
            )


@dataclass(frozen=True, slots=True)
class HealthEvent:
    """A device became unhealthy (or, for backends that can tell, healthy again).

    ``uuid`` None means every device of the node (for example when the driver stops
    answering).
    """

    uuid: str | None
    healthy: bool
    reason: str


HealthSink = Callable[[HealthEvent], object]


@runtime_checkable
class DiscoveryBackend(Protocol):
    """The one seam between the agent and a vendor's management library."""

    @property
    def name(self) -> str:
        """Short backend name, as chosen in the settings (``nvml``, ``static``, ...)."""
        ...

    def discover(self) -> tuple[PhysicalDevice, ...]:
        """The node's devices now, ordered by index. Raises ``DiscoveryError``."""
        ...

    def watch_health(self, stop: threading.Event, emit: HealthSink) -> None:
        """Block, calling ``emit`` for each health change, until ``stop`` is set."""
        ...

    def close(self) -> None:
        """Release the vendor library."""
        ...
