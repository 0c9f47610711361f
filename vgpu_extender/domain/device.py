"""Physical devices and the inventory of one node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: A vendor's own facts about a device, as (key, value) pairs sorted by key (HAMi's
#: ``custominfo``, e.g. Ascend's ``NetworkID``): hashable, and compared by value.
CustomInfo = tuple[tuple[str, int | float | str | bool], ...]

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
    custom_info: CustomInfo = ()

    def custom(self, key: str) -> int | float | str | bool | None:
        """One of the vendor's own facts about the device, or None."""
        for name, value in self.custom_info:
            if name == key:
                return value
        return None


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
