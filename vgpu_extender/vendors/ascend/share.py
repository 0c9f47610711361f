"""How HAMi shares one Ascend NPU, as the engine's stage table, and which NPUs a
container of several takes together (the topology pick).

The stages are HAMi's per-device checks (``Fit`` in ``pkg/device/ascend``) after health,
type and uuid, in its order: a free slot, memory, cores (a request over 100 counts as
100), a 100-core share on a 100-core NPU needs the NPU unused, and a share of no cores
needs some cores left. Hard-split vNPUs ask for no cores, so only slots and memory bind
them; a whole card takes the card's memory, which makes it exclusive through memory.

The effective core total is the registered ``devcore``: HAMi uses 100 for a hami-core
pod, which is what a hami-core node registers, and the mode gate keeps hami-core pods
off other nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import Device, DeviceUsage, Reason
from vgpu_extender.domain.share import (
    Capacity,
    CapacityView,
    HeldShare,
    ShareDemand,
    ShareModel,
    Stage,
)
from vgpu_extender.vendors.ascend.chips import ChipConfig

#: A core request above this is read as this; a share of this on a 100-core NPU is alone.
FULL_CORES = 100
NETWORK_ID = "NetworkID"


def _cores(demand: ShareDemand) -> int:
    return min(demand.cores, FULL_CORES)


def _has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _has_memory(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.memory >= demand.memory_on(total.memory)


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= _cores(demand)


def _alone(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    # HAMi: total == 100 && request == 100 && Used > 0 is a conflict.
    return (total.cores != FULL_CORES) | (free.slots == total.slots)


def _has_compute(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    # HAMi: total != 0 && Usedcores == total && request == 0 is exhausted.
    return (total.cores == 0) | (free.cores != 0)


def _asks_full(demand: ShareDemand) -> bool:
    return _cores(demand) == FULL_CORES


def _asks_no_cores(demand: ShareDemand) -> bool:
    return demand.cores == 0


def _slots_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: vNPU slots {used.slots}/{total.slots}"


def _memory_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: memory {used.memory}/{total.memory} MiB"


def _cores_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: cores {used.cores}/{total.cores}"


def _alone_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} is in use by {used.slots - demand.slots} allocation(s); "
        f"a grant of all {FULL_CORES} cores needs an unused npu"
    )


def _compute_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} has all cores in use ({used.cores}/{total.cores}); "
        "a grant with cores 0 cannot share it"
    )


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, demand.memory_on(total.memory), _cores(demand))


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(
        slots=usage.slots,
        memory_mib=usage.memory_mib,
        cores=usage.cores,
        exclusive=usage.cores >= FULL_CORES,
    )


STAGES = (
    Stage(Reason.SLOTS, _has_slot, _slots_text, when_empty=False),
    Stage(Reason.MEMORY, _has_memory, _memory_text, measure="memory"),
    Stage(Reason.CORES, _has_cores, _cores_text, measure="cores"),
    Stage(Reason.EXCLUSIVE, _alone, _alone_text, applies=_asks_full, when_empty=False),
    Stage(Reason.NO_COMPUTE, _has_compute, _compute_text, applies=_asks_no_cores, when_empty=False),
)


def ascend_share(chip: ChipConfig) -> ShareModel:
    """The share model of one chip's NPUs, with the chip's topology pick."""
    if chip.is_910c:
        pick = pick_910c
    elif chip.has_network_topology:
        pick = pick_by_network
    else:
        pick = pick_first
    return ShareModel(
        name=chip.common_word,
        stages=STAGES,
        consumed=_consumed,
        held=_held,
        noun="npu",
        pick=pick,
    )


# -- which NPUs a container takes --------------------------------------------------


def pick_first(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    """No topology: the first ``count`` in the device policy's order."""
    return tuple(range(count)) if len(fitting) >= count else None


def pick_by_network(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    """910A and 910B*: when every fitting NPU carries a NetworkID (its HCCS ring), fill
    from the ring with the most fitting NPUs (HAMi's ``computeBestCombination``: the
    emptiest ring, not the best fit); a tie goes to the ring seen first. Without
    NetworkIDs, the first ``count``."""
    if len(fitting) < count:
        return None
    if count <= 1 or len(fitting) == count:
        return tuple(range(count))
    networks = [device.custom(NETWORK_ID) for device in fitting]
    if any(network is None for network in networks):
        return tuple(range(count))
    groups: dict[object, list[int]] = {}
    for position, network in enumerate(networks):
        groups.setdefault(network, []).append(position)
    # sorted() is stable: equal sizes keep the order the rings were first seen in.
    ranked = sorted(groups.values(), key=len, reverse=True)
    chosen = [position for group in ranked for position in group][:count]
    return tuple(chosen)


def pick_910c(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    """910C: one NPU alone anywhere; several only as whole modules (``index // 2``), both
    NPUs of each fitting, taken in the policy's order until ``count`` is reached; any
    other count (an odd one) cannot be met (HAMi's ``computeBestCombination910C``)."""
    if len(fitting) < count:
        return None
    if count <= 1:
        return tuple(range(count))
    modules: dict[int, list[int]] = {}
    for position, device in enumerate(fitting):
        modules.setdefault(device.index // 2, []).append(position)
    chosen: list[int] = []
    for members in modules.values():
        if len(chosen) >= count:
            break
        if len(members) == 2:
            chosen.extend(members)
    return tuple(chosen) if len(chosen) == count else None
