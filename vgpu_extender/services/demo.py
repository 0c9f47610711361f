"""The built-in sample inventory for ``serve --demo``: no cluster, a few nodes at once.

Two GPU models, NUMA layouts that differ, and the ``priority.lixueduan.com`` label on
some nodes, so every part of filter and prioritize has something to show. When the
process serves Ascend chips, an NPU node of each of two: eight 910B3 in two HCCS rings
(NetworkID 0 and 1, as HAMi's Ascend plugin registers them) and four 310P, without
topology.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.policies.label_priority import DEFAULT_LABEL
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, ChipConfig
from vgpu_extender.vendors.ascend.inventory_codec import decode_inventory

A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
T4 = "NVIDIA-Tesla T4"
#: The Ascend demo nodes: (node, chip's CommonWord, chips).
ASCEND_NODES = (("demo-910b3-1", "Ascend910B3", 8), ("demo-310p-1", "Ascend310P", 4))


def _gpus(node: str, model: str, memory_mib: int, numa: tuple[int, ...]) -> tuple[Device, ...]:
    return tuple(
        Device(
            uuid=f"GPU-demo-{node}-{i}",
            index=i,
            count=10,
            memory_mib=memory_mib,
            cores=100,
            type=model,
            numa=numa_node,
        )
        for i, numa_node in enumerate(numa)
    )


def _npus(node: str, chip: ChipConfig, chips: int) -> tuple[Device, ...]:
    """The chip's NPUs as its plugin registers them (``hami.io/node-register-<CW>``),
    read by the vendor's own codec."""
    entries = []
    for i in range(chips):
        entry: dict[str, object] = {
            "id": f"NPU-demo-{node}-{i}",
            "index": i,
            "count": chip.slots,
            "devmem": chip.memory_allocatable,
            "devcore": chip.ai_core,
            "type": chip.common_word,
            "health": True,
        }
        if chip.has_network_topology:
            # The plugin's rule: chips 0-3 on one ring, 4-7 on the other.
            entry["custominfo"] = {"NetworkID": 0 if i < 4 else 1}
        entries.append(entry)
    return decode_inventory(json.dumps(entries), chip)


def demo_inventory(
    *, priority_label: str = DEFAULT_LABEL, vendors: Collection[str] = ()
) -> list[NodeInventory]:
    """Four GPU nodes: two with 4 A100 80GB (NUMA 0,0,1,1), two with 2 T4 16GB; and the
    Ascend nodes of the chips among ``vendors`` (the vendor words served)."""
    layout = (
        ("demo-a100-1", A100, 81920, (0, 0, 1, 1), "10"),
        ("demo-a100-2", A100, 81920, (0, 0, 1, 1), "20"),
        ("demo-t4-1", T4, 15360, (0, 0), "30"),
        ("demo-t4-2", T4, 15360, (0, 1), None),
    )
    nodes: list[NodeInventory] = []
    for name, model, memory, numa, priority in layout:
        labels = {"kubernetes.io/hostname": name, "gpu": "on"}
        if priority is not None:
            labels[priority_label] = priority
        nodes.append(
            NodeInventory(name=name, devices=_gpus(name, model, memory, numa), labels=labels)
        )
    chips = {chip.common_word: chip for chip in DEFAULT_CHIPS}
    for name, word, count in ASCEND_NODES:
        if word in vendors:
            labels = {"kubernetes.io/hostname": name, "ascend": "on"}
            nodes.append(
                NodeInventory(name=name, devices=_npus(name, chips[word], count), labels=labels)
            )
    return nodes
