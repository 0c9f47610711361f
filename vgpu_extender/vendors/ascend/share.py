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

import itertools
import math
from collections.abc import Sequence

from vgpu_extender.domain import Device
from vgpu_extender.domain.share import PickRule, ShareModel
from vgpu_extender.vendors import hami_share
from vgpu_extender.vendors.ascend.chips import ChipConfig

NETWORK_ID = "NetworkID"
#: HAMi's generic Fit, its refusals naming vNPU slots and the NPU.
STAGES = hami_share.generic_stages(slots="vNPU slots", noun="npu")


def ascend_share(chip: ChipConfig) -> ShareModel:
    """The share model of one chip's NPUs, with the chip's topology pick: 910C's modules
    (a rule that refuses sets), 910A/910B's rings (a preference only, so the engine's
    device count stays exact), and none for chips without topology (the engine takes
    the first ``count`` in policy order, with no exact choice to pay for). 910 chips
    group their NPUs by ``NetworkID`` for HAMi's ring bonus to the node score; a chip
    with templates hands memory out in template pieces (smallest to largest), which the
    fragmentation policy counts."""
    pick: PickRule | None = None
    refuses = False
    if chip.is_910c:
        pick, refuses = pick_910c, True
    elif chip.has_network_topology:
        pick = pick_by_network
    sizes = [template.memory for template in chip.templates]
    return ShareModel(
        name=chip.common_word,
        stages=STAGES,
        consumed=hami_share.consumed,
        held=hami_share.held,
        noun="npu",
        pick=pick,
        pick_refuses=refuses,
        group_key=NETWORK_ID if chip.has_network_topology else None,
        memory_quantum=min(sizes, default=1),
        memory_piece=max(sizes, default=0),
        honours_mutex=True,
    )


# -- which NPUs a container takes --------------------------------------------------

#: Above this many ways of choosing rings, the fewest rings are filled largest first
#: (HAMi's plugin registers two rings per node; the bound keeps a hostile inventory of
#: many rings from costing a combinatorial search).
_MOST_RING_SETS = 4096


def pick_by_network(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    """910A and 910B*: when every fitting NPU carries a NetworkID (its HCCS ring), the
    ring that holds the request and leaves the fewest fitting NPUs stranded after it
    (best fit), so that whole rings stay whole for the requests that need them; a
    request no ring holds fills the fewest rings, the set of them leaving the fewest
    stranded, largest ring first. Ties go to the ring the policy's order sees first,
    and within a ring the policy's order decides. Without NetworkIDs, the first
    ``count``.

    HAMi's ``computeBestCombination`` fills from the ring with the most fitting NPUs
    instead, which splits a later 4-chip request that one ring could have held."""
    if len(fitting) < count:
        return None
    if count == 0 or len(fitting) == count:
        return tuple(range(count))
    networks = [device.custom(NETWORK_ID) for device in fitting]
    if any(network is None for network in networks):
        return tuple(range(count))
    groups: dict[object, list[int]] = {}
    for position, network in enumerate(networks):
        groups.setdefault(network, []).append(position)
    rings = list(groups.values())  # in the order the policy first sees each ring
    holding = [ring for ring in rings if len(ring) >= count]
    if holding:
        # min() keeps the first of equals: the ring seen first.
        return tuple(min(holding, key=len)[:count])
    chosen = [position for ring in _fewest_rings(rings, count) for position in ring][:count]
    return tuple(chosen)


def _fewest_rings(rings: list[list[int]], count: int) -> list[list[int]]:
    """The fewest rings that together hold ``count`` (none holds it alone), the set with
    the fewest NPUs over (ties: the set seen first), largest ring first."""
    by_size = sorted(rings, key=len, reverse=True)  # stable: equals keep their order
    needed, total = 0, 0
    while total < count:
        total += len(by_size[needed])
        needed += 1
    if math.comb(len(rings), needed) > _MOST_RING_SETS:
        return by_size[:needed]
    best, best_size = by_size[:needed], -1
    for subset in itertools.combinations(rings, needed):
        size = sum(len(ring) for ring in subset)
        if size >= count and (best_size < 0 or size < best_size):
            best, best_size = list(subset), size
    return sorted(best, key=len, reverse=True)


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
