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
from vgpu_extender.vendors import hami_share
from vgpu_extender.vendors.awsneuron.request import WORD
from vgpu_extender.vendors.awsneuron.topology import pick_devices


def cores_taken(total_cores: Any, demand: ShareDemand) -> Any:
    """The cores a share takes on a device (or each of a grid) with ``total_cores``."""
    return total_cores if demand.cores == 0 else demand.cores


def _unused(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.slots == total.slots


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= cores_taken(total.cores, demand)


def _whole(demand: ShareDemand) -> bool:
    return demand.cores == 0


_UNUSED_TEXT = hami_share.in_use_text("a whole device needs an unused one")


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, 0, cores_taken(total.cores, demand))


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(usage.slots, 0, usage.cores, exclusive=False)


NEURON_SHARE = ShareModel(
    name=WORD,
    stages=(
        Stage(Reason.SLOTS, hami_share.has_slot, hami_share.slots_text("shares"), when_empty=False),
        Stage(Reason.EXCLUSIVE, _unused, _UNUSED_TEXT, applies=_whole, when_empty=False),
        Stage(Reason.CORES, _has_cores, hami_share.cores_text("neuron cores"), measure="cores"),
    ),
    consumed=_consumed,
    held=_held,
    noun="neuron device",
    pick=pick_devices,
    pick_refuses=True,
    # HAMi's single-device Fit honours the pod's mutex policy; several devices are whole
    # ones, unused already.
    honours_mutex=True,
)
