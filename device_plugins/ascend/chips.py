"""An Ascend node's chips as the agent knows them, and which configured chip they are.

``NpuChip`` is one NPU chip: the opaque ``uuid`` the scheduler sees, the physical ID
containers name it by (``ASCEND_VISIBLE_DEVICES``), its logic ID and chip name. From
``npu-smi`` text the ``uuid`` is ``<node>-npu-<physical id>``: stable across restarts
and rescans, unique in the cluster, and within kubelet's 63 characters (a long node
name is shortened and keeps a hash of the whole name). HAMi's plugin uses the chip's
VDIE die ID instead, which only DCMI gives; a static file may set any ``uuid``.

The physical ID is the ``Device`` column of ``npu-smi info`` where it is printed
(310P layout), else the chip's logic ID: on a host that sees all its NPUs the two are
equal, the mapping DCMI's ``GetPhysicIDFromLogicID`` would give.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from device_plugins.ascend.npu_smi import InfoChip, MapChip, NpuSmiError
from device_plugins.discovery.base import MAX_UUID_LENGTH, DiscoveryError
from vgpu_extender.vendors.ascend.chips import ChipConfig


@dataclass(frozen=True, slots=True)
class NpuChip:
    uuid: str
    chip_name: str
    physical_id: int
    logic_id: int
    memory_mib: int = 0
    healthy: bool = True
    bus_id: str = ""


def chip_uuid(node: str, physical_id: int) -> str:
    """``<node>-npu-<physical id>``, shortened to fit kubelet's device IDs."""
    suffix = f"-npu-{physical_id}"
    plain = f"{node}{suffix}"
    if len(plain) <= MAX_UUID_LENGTH:
        return plain
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    keep = MAX_UUID_LENGTH - len(suffix) - len(digest) - 1
    return f"{node[:keep].rstrip('-.')}-{digest}{suffix}"


def name_variants(name: str) -> frozenset[str]:
    """How one chip's name may be spelled: ``Ascend 910B3``, ``Ascend910B3``, ``910B3``."""
    compact = name.replace(" ", "")
    return frozenset({name, compact, compact.removeprefix("Ascend")} - {""})


def join_npu_smi(
    node: str, info: Sequence[InfoChip], chip_map: Sequence[MapChip]
) -> tuple[NpuChip, ...]:
    """The node's chips from ``npu-smi info`` and ``npu-smi info -m``, by logic ID."""
    by_position = {(chip.npu_id, chip.chip_id): chip for chip in info}
    chips: list[NpuChip] = []
    for entry in chip_map:
        row = by_position.get((entry.npu_id, entry.chip_id))
        if row is None:
            raise NpuSmiError(
                f"'npu-smi info -m' lists NPU {entry.npu_id} chip {entry.chip_id} "
                f"(logic ID {entry.logic_id}), which 'npu-smi info' does not show"
            )
        physical = row.device_id if row.device_id is not None else entry.logic_id
        chips.append(
            NpuChip(
                uuid=chip_uuid(node, physical),
                chip_name=row.name,
                physical_id=physical,
                logic_id=entry.logic_id,
                memory_mib=row.memory_total_mib,
                healthy=row.healthy,
                bus_id=row.bus_id,
            )
        )
    check_chips(chips)
    return tuple(sorted(chips, key=lambda chip: chip.logic_id))


def check_chips(chips: Iterable[NpuChip]) -> None:
    """Distinct ids, physical IDs and logic IDs; raises ``DiscoveryError``."""
    seen: dict[str, set[int]] = {"physical": set(), "logic": set()}
    uuids: set[str] = set()
    for chip in chips:
        if chip.uuid in uuids:
            raise DiscoveryError(f"chip id {chip.uuid!r} appears twice")
        uuids.add(chip.uuid)
        for what, value in (("physical", chip.physical_id), ("logic", chip.logic_id)):
            if value in seen[what]:
                raise DiscoveryError(f"two chips have {what} ID {value}")
            seen[what].add(value)


def chip_config(chips: Sequence[NpuChip], configs: Sequence[ChipConfig]) -> ChipConfig:
    """The configured chip every one of the node's chips is (by ``chipName``), as HAMi's
    plugin picks it; ``DiscoveryError`` for no chips, mixed chips or an unknown one."""
    if not chips:
        raise DiscoveryError("no Ascend NPU found on this node")
    names = sorted({chip.chip_name for chip in chips})
    if len(names) > 1:
        raise DiscoveryError(f"this node mixes Ascend chips {', '.join(names)}; one kind is served")
    variants = name_variants(names[0])
    for config in configs:
        if config.chip_name and name_variants(config.chip_name) & variants:
            return config
    known = ", ".join(sorted(c.chip_name for c in configs if c.chip_name))
    raise DiscoveryError(
        f"chip {names[0]!r} is not in the Ascend chip table (chipName: {known}); "
        "add it to vnpus in the file VGPU_DP_ASCEND_CONFIG_FILE names"
    )
