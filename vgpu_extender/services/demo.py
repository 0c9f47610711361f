"""The built-in sample inventory for ``serve --demo``: no cluster, a few nodes at once.

Two GPU models, NUMA layouts that differ, and the ``priority.lixueduan.com`` label on
some nodes, so every part of filter and prioritize has something to show.
"""

from __future__ import annotations

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.policies.label_priority import DEFAULT_LABEL

A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
T4 = "NVIDIA-Tesla T4"


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


def demo_inventory(*, priority_label: str = DEFAULT_LABEL) -> list[NodeInventory]:
    """Four nodes: two with 4 A100 80GB (NUMA 0,0,1,1), two with 2 T4 16GB."""
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
    return nodes
