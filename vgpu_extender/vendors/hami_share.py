"""HAMi's generic per-device ``Fit`` as the engine's stage table, for the vendors whose
Fit is the common one (Cambricon, Hygon, Iluvatar, Moore Threads).

After type and uuid, in HAMi's order: a free slot (``Count > Used``), memory (MiB, or a
percentage of the device's), cores (a request over 100 counts as 100), a 100-core share
on a device of 100 cores needs the device unused, and a share of no cores needs some
cores left on a device that has any. A device of another core total (Moore Threads'
16) is never taken alone through cores.
"""

from __future__ import annotations

from vgpu_extender.domain import DeviceUsage, Reason
from vgpu_extender.domain.share import (
    Capacity,
    CapacityView,
    HeldShare,
    PickRule,
    ShareDemand,
    ShareModel,
    Stage,
)

#: A core request above this is read as this; a share of this on a 100-core device is alone.
FULL_CORES = 100


def clamp_cores(cores: int) -> int:
    """HAMi's ``if k.Coresreq > 100 { k.Coresreq = 100 }``."""
    return min(cores, FULL_CORES)


def _has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _has_memory(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.memory >= demand.memory_on(total.memory)


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= clamp_cores(demand.cores)


def _alone(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    # HAMi: Totalcore == 100 && Coresreq == 100 && Used > 0 is a conflict.
    return (total.cores != FULL_CORES) | (free.slots == total.slots)


def _has_compute(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    # HAMi: Totalcore != 0 && Usedcores == Totalcore && Coresreq == 0 is exhausted.
    return (total.cores == 0) | (free.cores != 0)


def _asks_full(demand: ShareDemand) -> bool:
    return clamp_cores(demand.cores) == FULL_CORES


def _asks_no_cores(demand: ShareDemand) -> bool:
    return demand.cores == 0


def _slots_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: slots {used.slots}/{total.slots}"


def _memory_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: memory {used.memory}/{total.memory} MiB"


def _cores_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: cores {used.cores}/{total.cores}"


def _alone_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} is in use by {used.slots - demand.slots} allocation(s); "
        f"a grant of all {FULL_CORES} cores needs an unused device"
    )


def _compute_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} has all cores in use ({used.cores}/{total.cores}); "
        "a grant with cores 0 cannot share it"
    )


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, demand.memory_on(total.memory), clamp_cores(demand.cores))


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(
        slots=usage.slots,
        memory_mib=usage.memory_mib,
        cores=usage.cores,
        exclusive=usage.cores >= FULL_CORES,
    )


GENERIC_STAGES = (
    Stage(Reason.SLOTS, _has_slot, _slots_text, when_empty=False),
    Stage(Reason.MEMORY, _has_memory, _memory_text, measure="memory"),
    Stage(Reason.CORES, _has_cores, _cores_text, measure="cores"),
    Stage(Reason.EXCLUSIVE, _alone, _alone_text, applies=_asks_full, when_empty=False),
    Stage(Reason.NO_COMPUTE, _has_compute, _compute_text, applies=_asks_no_cores, when_empty=False),
)


def generic_share(
    name: str, *, noun: str, pick: PickRule | None = None, pick_refuses: bool = False
) -> ShareModel:
    """The share model of a vendor whose Fit is HAMi's generic one; no pick rule unless
    the vendor has a real topology or size rule."""
    return ShareModel(
        name=name,
        stages=GENERIC_STAGES,
        consumed=_consumed,
        held=_held,
        noun=noun,
        pick=pick,
        pick_refuses=pick_refuses,
    )
