"""How HAMi shares an AMD GPU: ``count`` slots, memory in MiB, and compute units (CUs,
the registered ``devcore``). An ask's cores are a percent; on a GPU of ``T`` CUs it takes
``T * percent / 100`` (integer division, as HAMi converts). 100 percent asks for the GPU
alone. Stages in HAMi's Fit order: slots, memory, CUs, then exclusivity.

A share already given (the store's re-check) holds CUs, not a percent: ``HeldUnits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu_extender.domain import DeviceUsage, Reason
from vgpu_extender.domain.share import Capacity, CapacityView, ShareDemand, ShareModel, Stage
from vgpu_extender.vendors import hami_share

FULL_PERCENT = 100


@dataclass(frozen=True, slots=True)
class HeldUnits:
    """A share already given, its cores in compute units (what the annotation records)."""

    slots: int
    memory_mib: int
    cores: int
    exclusive: bool
    memory_percent: int = 0
    mutex: bool = False

    def memory_on(self, device_memory_mib: Any) -> Any:
        return self.memory_mib


def units(total_cores: Any, demand: ShareDemand) -> Any:
    """The CUs a demand takes on a GPU (or each GPU of a grid) with ``total_cores``."""
    if isinstance(demand, HeldUnits):
        return demand.cores
    return total_cores * demand.cores // FULL_PERCENT


def _has_units(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= units(total.cores, demand)


def _alone(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots == total.slots


def _asks_all(demand: ShareDemand) -> bool:
    return demand.exclusive


_ALONE_TEXT = hami_share.in_use_text("a grant of all compute units needs an unused gpu")


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, demand.memory_on(total.memory), units(total.cores, demand))


def _held(usage: DeviceUsage) -> ShareDemand:
    # A held share's exclusivity cannot be told from its CUs alone: the slots and
    # memory stages re-check it.
    return HeldUnits(usage.slots, usage.memory_mib, usage.cores, exclusive=False)


AMD_SHARE = ShareModel(
    name="AMD",
    stages=(
        Stage(Reason.SLOTS, hami_share.has_slot, hami_share.slots_text(), when_empty=False),
        Stage(Reason.MEMORY, hami_share.has_memory, hami_share.memory_text, measure="memory"),
        Stage(Reason.CORES, _has_units, hami_share.cores_text("compute units"), measure="cores"),
        Stage(Reason.EXCLUSIVE, _alone, _ALONE_TEXT, applies=_asks_all, when_empty=False),
    ),
    consumed=_consumed,
    held=_held,
    noun="gpu",
    honours_mutex=True,
)
