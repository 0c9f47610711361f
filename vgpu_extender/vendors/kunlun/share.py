"""How HAMi shares Kunlunxin XPUs, in its Fit order, with the wing topology pick
(``topology``: it refuses counts other than 1, 2, 4, 8 and sets it cannot wire).

- ``kunlun``: a whole XPU, alone (HAMi fits only a device with ``Used == 0``).
- ``XPU``: a quarter, half or whole card: slots, memory, then the same-size rule (a
  shared XPU takes only shares of its shares' size, ``Usedmem / Used == Memreq``),
  then cores (in proportion to memory, so bound by it on a standard card).
"""

from __future__ import annotations

from dataclasses import replace

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
from vgpu_extender.vendors.kunlun.request import VXPU_WORD, WHOLE_WORD
from vgpu_extender.vendors.kunlun.topology import pick_xpus
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

_WHOLE = (Reason.SLOTS, Reason.EXCLUSIVE, Reason.MEMORY, Reason.CORES)

WHOLE_SHARE: ShareModel = replace(
    NVIDIA_SHARE,
    name=WHOLE_WORD,
    stages=tuple(s for s in NVIDIA_SHARE.stages if s.reason in _WHOLE),
    noun="xpu",
    pick=pick_xpus,
    pick_refuses=True,
    # Already alone on its XPUs: HAMi's whole-card Fit reads no mutex policy.
    honours_mutex=False,
)


def _same_size(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    used = total.slots - free.slots
    # One share's size: a held footprint of several shares (one pod) divides by them.
    size = demand.memory_on(total.memory) // demand.slots
    # ``used + (used == 0)`` is at least 1 for ints and arrays alike.
    return (used == 0) | ((total.memory - free.memory) // (used + (used == 0)) == size)


def _has_cores(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    return free.cores >= demand.cores


def _size_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} holds vXPUs of another size; a share of {demand.memory_mib} MiB "
        "needs an unused xpu or one of shares its size"
    )


def _consumed(total: Capacity, demand: ShareDemand) -> Capacity:
    return Capacity(demand.slots, demand.memory_on(total.memory), demand.cores)


def _held(usage: DeviceUsage) -> ShareDemand:
    return HeldShare(usage.slots, usage.memory_mib, usage.cores, exclusive=False)


VXPU_SHARE = ShareModel(
    name=VXPU_WORD,
    stages=(
        Stage(Reason.SLOTS, hami_share.has_slot, hami_share.slots_text(), when_empty=False),
        Stage(Reason.MEMORY, hami_share.has_memory, hami_share.memory_text, measure="memory"),
        Stage(Reason.EXCLUSIVE, _same_size, _size_text, when_empty=False),
        Stage(Reason.CORES, _has_cores, hami_share.cores_text(), measure="cores"),
    ),
    consumed=_consumed,
    held=_held,
    noun="xpu",
    pick=pick_xpus,
    pick_refuses=True,
    honours_mutex=True,
)
