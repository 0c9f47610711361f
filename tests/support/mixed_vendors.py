"""A cluster with a node of every vendor the registry knows, each node as its vendor's
device plugin leaves it (a registration annotation, or node capacity where HAMi's
scheduler reads that), and for each vendor the asks a pod can make of it.

Inventories are written through the vendors' own seams (``encode_inventory``) or as the
vendor's plugin writes them (HAMi's literals), never as device ids the extender makes up:
ids built from a node's name are read back from the extender's index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu_extender.domain import Device
from vgpu_extender.vendors import Vendor, VendorSet
from vgpu_extender.vendors.ascend import AscendChipVendor
from vgpu_extender.vendors.ascend.inventory_codec import MODE_VNPU
from vgpu_extender.vendors.registry import VENDORS

#: Every vendor of the registry, NVIDIA first (the primary).
ALL_VENDORS = ",".join(VENDORS)


@dataclass(frozen=True)
class Ask:
    """One container's limits, and the pod annotations that go with them."""

    limits: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Kind:
    """One vendor word's node and asks. ``shared`` takes part of a device, ``whole`` a
    device of its own (None: the vendor has no such ask); once both are placed, ``fills``
    more pods asking ``fill`` fit and the next is refused."""

    word: str
    node: str
    shared: Ask | None
    whole: Ask | None
    fill: Ask
    fills: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


def _devices(vendor: Vendor, node: str, n: int, **fields: Any) -> str:
    """``n`` devices registered as the vendor's plugin registers them."""
    return vendor.encode_inventory(
        Device(f"{node}-{i}", index=i, vendor=vendor.name, **fields) for i in range(n)
    )


def kinds(vendors: VendorSet) -> list[Kind]:
    """The nodes and asks of every vendor word below, built with ``vendors``' members."""

    def v(word: str) -> Vendor:
        vendor = vendors.get(word)
        assert vendor is not None, f"no vendor {word} in the set"
        return vendor

    p310 = v("Ascend310P")
    assert isinstance(p310, AscendChipVendor)
    metax_qos = {"metax-tech.com/sgpu-qos-policy": "fixed-share"}
    sgpu = [
        {
            "uuid": f"GPU-metax-sgpu-{i}",
            "model": "sgpu",
            "totalDevCount": 16,
            "totalCompute": 100,
            "bdf": f"0000:4{i}:00.0",
            "totalVRam": 32768,
            "numa": 0,
            "healthy": True,
            "qosPolicy": "fixed-share",
        }
        for i in range(2)
    ]
    drs = {
        "devices": [{"index": str(i), "minor": str(i), "capacity": 6} for i in range(2)],
        "profiles": {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"},
    }
    return [
        # Two GPUs of 16 GiB, ten shares each.
        Kind(
            "NVIDIA",
            "nvidia",
            Ask({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}),
            Ask({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}),
            Ask({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}),
            3,
            annotations={
                v("NVIDIA").inventory_annotation: _devices(
                    v("NVIDIA"), "nvidia", 2, count=10, memory_mib=16384, type="NVIDIA-Tesla T4"
                )
            },
        ),
        # Two 310P cards, asked for whole (its templates are the Ascend test's).
        Kind(
            "Ascend310P",
            "ascend",
            None,
            Ask({"huawei.com/Ascend310P": "1"}),
            Ask({"huawei.com/Ascend310P": "1"}),
            1,
            annotations={
                v("Ascend310P").inventory_annotation: _devices(
                    p310,
                    "ascend",
                    2,
                    count=p310.chip.slots,
                    memory_mib=p310.chip.memory_allocatable,
                    cores=p310.chip.ai_core,
                    type="Ascend310P",
                    mode=MODE_VNPU,
                ),
                "hami-vnpu-core": "false",
            },
        ),
        # Two MLUs from capacity: 100 vcores and 64 vmemory units (16 GiB) each.
        Kind(
            "MLU",
            "cambricon",
            Ask(
                {
                    "cambricon.com/vmlu": "1",
                    "cambricon.com/mlu.smlu.vmemory": "16",
                    "cambricon.com/mlu.smlu.vcore": "50",
                }
            ),
            Ask({"cambricon.com/vmlu": "1"}),
            Ask(
                {
                    "cambricon.com/vmlu": "1",
                    "cambricon.com/mlu.smlu.vmemory": "16",
                    "cambricon.com/mlu.smlu.vcore": "50",
                }
            ),
            1,
            capacity={
                "cambricon.com/mlu.smlu.vcore": "200",
                "cambricon.com/mlu.smlu.vmemory": "128",
            },
        ),
        Kind(
            "DCU",
            "hygon",
            Ask({"hygon.com/dcunum": "1", "hygon.com/dcumem": "4096", "hygon.com/dcucores": "25"}),
            Ask({"hygon.com/dcunum": "1"}),
            Ask({"hygon.com/dcunum": "1", "hygon.com/dcumem": "4096", "hygon.com/dcucores": "25"}),
            3,
            annotations={
                v("DCU").inventory_annotation: _devices(
                    v("DCU"), "DCU-hygon", 2, count=4, memory_mib=16384, type="DCU-K100_AI"
                )
            },
        ),
        # vMem in 256 MiB units: 16 is 4 GiB.
        Kind(
            "BI-V150",
            "iluvatar",
            Ask(
                {
                    "iluvatar.ai/BI-V150-vgpu": "1",
                    "iluvatar.ai/BI-V150.vMem": "16",
                    "iluvatar.ai/BI-V150.vCore": "25",
                }
            ),
            Ask({"iluvatar.ai/BI-V150-vgpu": "1", "iluvatar.ai/BI-V150.vCore": "100"}),
            Ask(
                {
                    "iluvatar.ai/BI-V150-vgpu": "1",
                    "iluvatar.ai/BI-V150.vMem": "16",
                    "iluvatar.ai/BI-V150.vCore": "25",
                }
            ),
            3,
            annotations={
                v("BI-V150").inventory_annotation: _devices(
                    v("BI-V150"), "iluvatar", 2, count=4, memory_mib=16384, type="BI-V150"
                )
            },
        ),
        Kind(
            "Metax-GPU",
            "metax-gpu",
            None,
            Ask({"metax-tech.com/gpu": "1"}),
            Ask({"metax-tech.com/gpu": "1"}),
            1,
            capacity={"metax-tech.com/gpu": "2"},
        ),
        # vmemory without a unit is GiB.
        Kind(
            "Metax-SGPU",
            "metax-sgpu",
            Ask(
                {
                    "metax-tech.com/sgpu": "1",
                    "metax-tech.com/vmemory": "4",
                    "metax-tech.com/vcore": "25",
                },
                metax_qos,
            ),
            Ask({"metax-tech.com/sgpu": "1"}, metax_qos),
            Ask(
                {
                    "metax-tech.com/sgpu": "1",
                    "metax-tech.com/vmemory": "4",
                    "metax-tech.com/vcore": "25",
                },
                metax_qos,
            ),
            3,
            annotations={"metax-tech.com/node-gpu-devices": json.dumps(sgpu)},
        ),
        Kind(
            "GCU",
            "enflame-gcu",
            None,
            Ask({"enflame.com/gcu": "1"}),
            Ask({"enflame.com/gcu": "1"}),
            1,
            capacity={"enflame.com/gcu": "2"},
        ),
        # Two GCUs of six DRS slices: half a card (3g.20gb), a whole one (6g.40gb).
        Kind(
            "Enflame",
            "enflame-drs",
            Ask({"enflame.com/drs-gcu": "3"}),
            Ask({"enflame.com/drs-gcu": "6"}),
            Ask({"enflame.com/drs-gcu": "3"}),
            1,
            annotations={"enflame.com/gcu-drs-capacity": json.dumps(drs)},
        ),
        # Eight XPUs in two wings of four: four whole cards each time.
        Kind(
            "kunlun",
            "kunlun-xpu",
            None,
            Ask({"kunlunxin.com/xpu": "4"}),
            Ask({"kunlunxin.com/xpu": "4"}),
            1,
            capacity={"kunlunxin.com/xpu": "8"},
        ),
        # vXPU: quarter cards (24576 MiB) of 96 GiB cards, four shares each.
        Kind(
            "XPU",
            "kunlun-vxpu",
            Ask({"kunlunxin.com/vxpu": "1", "kunlunxin.com/vxpu-memory": "24576"}),
            Ask({"kunlunxin.com/vxpu": "1"}),
            Ask({"kunlunxin.com/vxpu": "1", "kunlunxin.com/vxpu-memory": "24576"}),
            3,
            annotations={
                v("XPU").inventory_annotation: _devices(
                    v("XPU"), "vxpu", 2, count=4, memory_mib=98304, type="XPU"
                )
            },
        ),
        # Two cards from capacity: 16 core units and 96 memory units (512 MiB) each.
        Kind(
            "Mthreads",
            "mthreads",
            Ask(
                {
                    "mthreads.com/vgpu": "1",
                    "mthreads.com/sgpu-memory": "8",
                    "mthreads.com/sgpu-core": "4",
                }
            ),
            Ask(
                {
                    "mthreads.com/vgpu": "1",
                    "mthreads.com/sgpu-memory": "96",
                    "mthreads.com/sgpu-core": "16",
                }
            ),
            Ask(
                {
                    "mthreads.com/vgpu": "1",
                    "mthreads.com/sgpu-memory": "8",
                    "mthreads.com/sgpu-core": "4",
                }
            ),
            3,
            capacity={"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192"},
        ),
        # Two devices of two cores on an inf2 instance: one core, then a whole device.
        Kind(
            "AWSNeuron",
            "neuron",
            Ask({"aws.amazon.com/neuroncore": "1"}),
            Ask({"aws.amazon.com/neuron": "1"}),
            Ask({"aws.amazon.com/neuroncore": "1"}),
            1,
            capacity={"aws.amazon.com/neuron": "2", "aws.amazon.com/neuroncore": "4"},
            labels={"node.kubernetes.io/instance-type": "inf2.xlarge"},
        ),
        Kind(
            "AMD",
            "amd",
            Ask({"amd.com/gpu": "1", "amd.com/gpumem": "4096", "amd.com/gpucores": "25"}),
            Ask({"amd.com/gpu": "1", "amd.com/gpucores": "100"}),
            Ask({"amd.com/gpu": "1", "amd.com/gpumem": "4096", "amd.com/gpucores": "25"}),
            3,
            annotations={
                v("AMD").inventory_annotation: _devices(
                    v("AMD"), "amd", 2, count=4, memory_mib=16384, type="MI210"
                )
            },
            capacity={"amd.com/gpu": "8"},
        ),
    ]


def node_of(kind: Kind) -> dict[str, Any]:
    """The Node object: its vendor's annotations, capacity (as allocatable too) and labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": kind.node,
            "labels": {"kubernetes.io/hostname": kind.node, **kind.labels},
            "annotations": dict(kind.annotations),
        },
        "status": {"capacity": dict(kind.capacity), "allocatable": dict(kind.capacity)},
    }


def pod_of(name: str, ask: Ask) -> dict[str, Any]:
    """A Pod as the API server stores it, one container asking ``ask``."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if ask.annotations:
        metadata["annotations"] = dict(ask.annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": dict(ask.limits)}}],
            "schedulerName": "vgpu-scheduler",
        },
        "status": {"phase": "Pending"},
    }
