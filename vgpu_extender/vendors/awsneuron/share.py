"""How HAMi shares an AWS Neuron device, in its Fit order: a device holds one share per
core (``count``); a share of ``c`` cores needs ``c`` free; a whole device (an ask of no
cores) needs the device unused and takes all its cores. Several devices are placed by
``topology`` (a rule that may refuse a node where enough devices fit one by one)."""

from __future__ import annotations

from typing import Any

from vgpu_extender.domain import DeviceUsage, Reason
from vgpu_extender.domain.share import (
    Capacity,
    CapacityView,
    HeldShare,
    ShareDemand,
    ShareModel,
    Stage,
)
from vgpu_extender.vendors.awsneuron.request import WORD
from vgpu_extender.vendors.awsneuron.topology import pick_devices


def cores_taken(total_cores: Any, demand: ShareDemand) -> Any:
    """The cores a share takes on a device (or each of a grid) with ``total_cores``."""
    return total_cores if demand.cores == 0 else demand.cores


def _has_slot(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _unused(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots == total.slots


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= cores_taken(total.cores, demand)


def _whole(demand: ShareDemand) -> bool:
    return demand.cores == 0


def _slots_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: shares {used.slots}/{total.slots}"


def _unused_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} is in use by {used.slots - demand.slots} allocation(s); "
        "a whole device needs an unused one"
    )


def _cores_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return f"{where} over-allocated: neuron cores {used.cores}/{total.cores}"


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, 0, cores_taken(total.cores, demand))


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(usage.slots, 0, usage.cores, exclusive=False)


NEURON_SHARE = ShareModel(
    name=WORD,
    stages=(
        Stage(Reason.SLOTS, _has_slot, _slots_text, when_empty=False),
        Stage(Reason.EXCLUSIVE, _unused, _unused_text, applies=_whole, when_empty=False),
        Stage(Reason.CORES, _has_cores, _cores_text, measure="cores"),
    ),
    consumed=_consumed,
    held=_held,
    noun="neuron device",
    pick=pick_devices,
    pick_refuses=True,
)
