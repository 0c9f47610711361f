"""Cambricon, Hygon, Iluvatar and Moore Threads beside NVIDIA in one vendor set: distinct
words and resources, one container asking two of them, each writing only its own pod
annotations, each reading its own node keys, and hostile pods refused by every one."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.domain import DeviceGrant, PodAssignment, RequestError
from vgpu_extender.vendors import NodeFacts, Vendor
from vgpu_extender.vendors.cambricon import cambricon_vendors
from vgpu_extender.vendors.hygon import hygon_vendors
from vgpu_extender.vendors.iluvatar import iluvatar_vendors
from vgpu_extender.vendors.mthreads import mthreads_vendors
from vgpu_extender.vendors.registry import create_vendor
from vgpu_extender.vendors.vendor_set import VendorSet

OURS: tuple[Vendor, ...] = (
    cambricon_vendors({}),
    hygon_vendors({}),
    *iluvatar_vendors({}),
    mthreads_vendors({}),
)
SET = VendorSet((create_vendor("nvidia"), *OURS))


def test_words_and_resources_are_distinct() -> None:
    assert SET.names == (
        "NVIDIA",
        "MLU",
        "DCU",
        "MR-V100",
        "MR-V50",
        "BI-V150",
        "BI-V100",
        "Mthreads",
    )
    seen: set[str] = set()
    for vendor in SET.members:
        assert not seen & vendor.resource_names, vendor.name
        seen |= vendor.resource_names


def test_one_container_asks_two_vendors() -> None:
    pod = {
        "metadata": {"uid": "u", "name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"limits": {"cambricon.com/vmlu": "1", "hygon.com/dcunum": "2"}},
                }
            ]
        },
    }
    (container,) = SET.parse_pod(pod).containers
    assert [(ask.vendor, ask.count) for ask in container.asks] == [("MLU", 1), ("DCU", 2)]


def test_each_vendor_writes_its_own_keys() -> None:
    grants = (
        DeviceGrant("n-cambricon-mlu-0", 256, 10, vendor="MLU"),
        DeviceGrant("DCU-1", 1024, 20, vendor="DCU"),
        DeviceGrant("n-mthreads-1", 512, 1, vendor="Mthreads"),
    )
    annotations = SET.bind_annotations(PodAssignment("n", (grants,), (False,)), bind_time=5)
    assert (
        annotations["hami.io/cambricon-mlu-devices-allocated"] == "n-cambricon-mlu-0,MLU,256,10:;"
    )
    assert annotations["hami.io/dcu-devices-allocated"] == "DCU-1,DCU,1024,20:;"
    assert annotations["hami.io/mthreads-vgpu-devices-allocated"] == "n-mthreads-1,Mthreads,512,1:;"
    assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_10_1"
    assert annotations["mthreads.com/gpu-index"] == "1"
    assert "hami.io/MR-V100-devices-allocated" not in annotations
    merged = SET.decode_assignments(annotations, init=(False,))
    assert merged is not None and sorted(g.uuid for g in merged[0]) == sorted(
        g.uuid for g in grants
    )


def test_each_vendor_reads_its_own_node_keys() -> None:
    annotations = {
        "hami.io/node-dcu-register": "DCU-1,4,65520,100,DCU-K100_AI,0,true,0,hami:",
        "hami.io/node-BI-V150-register": "GPU-1,10,32768,100,BI-V150,0,true:",
    }
    devices = SET.decode_node(NodeFacts("node-a", annotations=annotations))
    assert devices is not None
    assert [(d.uuid, d.vendor) for d in devices] == [("DCU-1", "DCU"), ("GPU-1", "BI-V150")]


HOSTILE: list[tuple[str, Any]] = [
    ("not an object", ["pod"]),
    ("spec not an object", {"spec": "x"}),
    ("containers not a list", {"spec": {"containers": {"name": "c"}}}),
    ("container not an object", {"spec": {"containers": [7]}}),
    ("limits not an object", {"spec": {"containers": [{"resources": {"limits": []}}]}}),
    (
        "annotation not a string",
        {
            "metadata": {
                "annotations": {
                    "cambricon.com/use-gpuuuid": 1,
                    "hygon.com/use-gpuuuid": 1,
                    "mthreads.ai/use-gpuuuid": 1,
                    **{
                        f"hami.io/use-{cw}-uuid": 1
                        for cw in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
                    },
                }
            }
        },
    ),
]


@pytest.mark.parametrize("vendor", OURS, ids=lambda v: v.name)
@pytest.mark.parametrize("pod", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_pods_are_refused(vendor: Vendor, pod: Any) -> None:
    with pytest.raises(RequestError):
        vendor.parse_pod(pod)
