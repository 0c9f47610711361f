"""HAMi's generic per-device ``Fit`` as the engine's stage table, for the vendors whose
Fit is the common one (Ascend, Cambricon, Hygon, Iluvatar, Moore Threads),
and the stages and refusals other vendors build theirs from.

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
    MisfitText,
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


def has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    """HAMi's ``Count > Used``: a free slot for each of the share's."""
    return free.slots >= demand.slots


def has_memory(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    """The share's memory (MiB, or a percentage of the device's) is free."""
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


def slots_text(label: str = "slots") -> MisfitText:
    """``<where> over-allocated: <label> used/total``."""

    def text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
        return f"{where} over-allocated: {label} {used.slots}/{total.slots}"

    return text


def memory_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: memory {used.memory}/{total.memory} MiB"


def cores_text(label: str = "cores") -> MisfitText:
    """``<where> over-allocated: <label> used/total``, of the cores dimension."""

    def text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
        return f"{where} over-allocated: {label} {used.cores}/{total.cores}"

    return text


def in_use_text(needs: str) -> MisfitText:
    """A device others hold, refused to a share that ``needs`` it unused."""

    def text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
        return f"{where} is in use by {used.slots - demand.slots} allocation(s); {needs}"

    return text


def _compute_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} has all cores in use ({used.cores}/{total.cores}); "
        "a grant with cores 0 cannot share it"
    )


def consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    """What a share takes: its slots, its memory, its cores (over 100 read as 100)."""
    return Capacity(demand.slots, demand.memory_on(total.memory), clamp_cores(demand.cores))


def held(usage: DeviceUsage) -> ShareDemand:
    """A share already given; one of all cores or more is exclusive."""
    return HeldShare(
        slots=usage.slots,
        memory_mib=usage.memory_mib,
        cores=usage.cores,
        exclusive=usage.cores >= FULL_CORES,
    )


def generic_stages(*, slots: str = "slots", noun: str = "device") -> tuple[Stage, ...]:
    """HAMi's generic Fit stages; ``slots`` names the slots in a refusal and ``noun`` the
    device a full-core grant needs unused (Ascend's ``vNPU slots`` and ``npu``)."""
    alone = in_use_text(f"a grant of all {FULL_CORES} cores needs an unused {noun}")
    return (
        Stage(Reason.SLOTS, has_slot, slots_text(slots), when_empty=False),
        Stage(Reason.MEMORY, has_memory, memory_text, measure="memory"),
        Stage(Reason.CORES, _has_cores, cores_text(), measure="cores"),
        Stage(Reason.EXCLUSIVE, _alone, alone, applies=_asks_full, when_empty=False),
        Stage(
            Reason.NO_COMPUTE, _has_compute, _compute_text, applies=_asks_no_cores, when_empty=False
        ),
    )


GENERIC_STAGES = generic_stages()


def generic_share(
    name: str,
    *,
    noun: str,
    pick: PickRule | None = None,
    pick_refuses: bool = False,
    one_device_per_pod: bool = False,
) -> ShareModel:
    """The share model of a vendor whose Fit is HAMi's generic one; no pick rule unless
    the vendor has a real topology or size rule. The generic Fit honours the pod's
    mutex policy; ``one_device_per_pod``: the vendor puts a pod on one device."""
    return ShareModel(
        name=name,
        stages=GENERIC_STAGES,
        consumed=consumed,
        held=held,
        noun=noun,
        pick=pick,
        pick_refuses=pick_refuses,
        honours_mutex=True,
        one_device_per_pod=one_device_per_pod,
    )
