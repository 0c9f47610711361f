"""How HAMi shares an NVIDIA GPU, as the engine's stage table.

A GPU has ``count`` split slots, memory in MiB and 100 cores (more with core scaling). A
share takes one slot, its memory (MiB, or a percentage of the GPU's) and its cores; 100
cores or more asks for the GPU alone, and a share of no cores still needs some left to
run at all. The stages go in HAMi's fit order (``fitInDevice``): slots, exclusivity,
memory, then cores. A pod's mutex policy keeps it off GPUs in use (HAMi's Fit since the
policy became a filter), right after the slots.
"""

from __future__ import annotations

from vgpu_extender.domain import DeviceUsage, Reason
from vgpu_extender.domain.share import (
    Capacity,
    CapacityView,
    HeldShare,
    ShareDemand,
    ShareModel,
    Stage,
)

#: Cores of one whole GPU: a share of this much asks for the GPU alone.
EXCLUSIVE_CORES = 100


def _has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _is_empty(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots == total.slots


def _has_memory(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.memory >= demand.memory_on(total.memory)


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= demand.cores


def _has_compute(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores > 0


def _exclusive(demand: ShareDemand) -> bool:
    return demand.exclusive


def _asks_cores(demand: ShareDemand) -> bool:
    return demand.cores > 0


def _asks_no_cores(demand: ShareDemand) -> bool:
    return demand.cores == 0


def _slots_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: slots {used.slots}/{total.slots}"


def _exclusive_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} is in use by {used.slots - demand.slots} allocation(s); "
        f"an exclusive grant (cores {demand.cores}) needs an empty device"
    )


def _memory_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: memory {used.memory}/{total.memory} MiB"


def _cores_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: cores {used.cores}/{total.cores}"


def _compute_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} has all cores in use ({used.cores}/{total.cores}); "
        "a grant with cores 0 cannot share it"
    )


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, demand.memory_on(total.memory), demand.cores)


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(
        slots=usage.slots,
        memory_mib=usage.memory_mib,
        cores=usage.cores,
        exclusive=usage.cores >= EXCLUSIVE_CORES,
    )


NVIDIA_SHARE = ShareModel(
    name="NVIDIA",
    stages=(
        Stage(Reason.SLOTS, _has_slot, _slots_text, when_empty=False),
        Stage(Reason.EXCLUSIVE, _is_empty, _exclusive_text, applies=_exclusive, when_empty=False),
        Stage(Reason.MEMORY, _has_memory, _memory_text, measure="memory"),
        Stage(Reason.CORES, _has_cores, _cores_text, applies=_asks_cores, measure="cores"),
        Stage(
            Reason.NO_COMPUTE,
            _has_compute,
            _compute_text,
            applies=_asks_no_cores,
            when_empty=False,
        ),
    ),
    consumed=_consumed,
    held=_held,
    noun="gpu",
    honours_mutex=True,
)
