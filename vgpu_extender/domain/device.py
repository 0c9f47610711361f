"""Physical devices and the inventory of one node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_MODE = "hami-core"


@dataclass(frozen=True, slots=True)
class Device:
    """One physical accelerator as the node agent registers it.

    ``count`` is the split count: how many allocations the device may hold.
    ``memory_mib`` and ``cores`` are its virtual totals (after scaling); 100 cores
    is one whole device without core over-subscription.
    """

    uuid: str
    index: int = 0
    count: int = 10
    memory_mib: int = 0
    cores: int = 100
    type: str = ""
    numa: int = 0
    mode: str = DEFAULT_MODE
    healthy: bool = True
    vendor: str = "NVIDIA"


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """What a node offers to the scheduler.

    ``problem`` is set when the node's inventory is missing or unreadable: the node
    then stays known but receives no new pods, and the problem is reported as the
    reason. ``cpu_milli`` and ``memory_mib`` are host resources, used only where the
    engine also plays kube-scheduler's NodeResourcesFit (trace replay).
    """

    name: str
    devices: tuple[Device, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    cordoned: frozenset[str] = frozenset()
    problem: str = ""
    cpu_milli: int | None = None
    memory_mib: int | None = None
