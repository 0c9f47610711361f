"""Pods of Cambricon, Iluvatar and Moore Threads placed by the engine on their vendors'
devices: a bare MLU count takes a whole MLU and keeps others off it (all its
memory is taken), the Iluvatar webhook's count x 100 cores give whole
GPUs written as 100 cores each, and a Moore Threads container's memory is split over
its GPUs in the allocated record."""

from __future__ import annotations

from typing import Any

from vgpu_extender.domain import NodeInventory, PodAssignment, Reason, Rejection
from vgpu_extender.engine import ClusterIndex, choose_devices
from vgpu_extender.vendors import Vendor
from vgpu_extender.vendors.cambricon import cambricon_vendors
from vgpu_extender.vendors.iluvatar import iluvatar_vendors
from vgpu_extender.vendors.mthreads import mthreads_vendors


def _pod(uid: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": uid},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


def _index(vendor: Vendor, devices: Any) -> ClusterIndex:
    index = ClusterIndex(initial_nodes=1, initial_slots=4, share=vendor.share)
    index.upsert_node(NodeInventory("n", tuple(devices)))
    return index


def test_a_bare_mlu_count_is_a_whole_mlu() -> None:
    vendor = cambricon_vendors({})
    capacity = {"cambricon.com/mlu.smlu.vcore": "100", "cambricon.com/mlu.smlu.vmemory": "96"}
    index = _index(vendor, vendor.devices_from_capacity("n", capacity))
    whole = vendor.parse_pod(_pod("a", {"cambricon.com/vmlu": "1"}))
    placed = choose_devices(index, whole, "n")
    assert isinstance(placed, PodAssignment)
    annotations = vendor.bind_annotations(placed, bind_time=1)
    assert (
        annotations["hami.io/cambricon-mlu-devices-allocated"]
        == "n-cambricon-mlu-0,MLU,24576,100:;"
    )
    assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_100_96"
    index.apply("a", placed)
    small = vendor.parse_pod(
        _pod(
            "b",
            {
                "cambricon.com/vmlu": "1",
                "cambricon.com/mlu.smlu.vmemory": "1",
                "cambricon.com/mlu.smlu.vcore": "10",
            },
        )
    )
    refused = choose_devices(index, small, "n")
    assert isinstance(refused, Rejection)
    # The whole MLU's memory is taken: memory is the first check that fails.
    assert refused.reason is Reason.MEMORY


def test_two_mlu_shares_fit_one_mlu() -> None:
    vendor = cambricon_vendors({})
    capacity = {"cambricon.com/mlu.smlu.vcore": "100", "cambricon.com/mlu.smlu.vmemory": "96"}
    index = _index(vendor, vendor.devices_from_capacity("n", capacity))
    limits = {
        "cambricon.com/vmlu": "1",
        "cambricon.com/mlu.smlu.vmemory": "40",
        "cambricon.com/mlu.smlu.vcore": "50",
    }
    for uid in ("a", "b"):
        placed = choose_devices(index, vendor.parse_pod(_pod(uid, limits)), "n")
        assert isinstance(placed, PodAssignment), placed
        index.apply(uid, placed)
    third = choose_devices(index, vendor.parse_pod(_pod("c", limits)), "n")
    assert isinstance(third, Rejection) and third.reason is Reason.MEMORY
    assert third.message(vendor.wording).startswith("CardInsufficientMemory")


def test_iluvatar_several_gpus_are_whole() -> None:
    vendor = next(v for v in iluvatar_vendors({}) if v.name == "MR-V100")
    devices = vendor.decode_inventory(
        "GPU-0,10,8192,100,MR-V100,0,true:GPU-1,10,8192,100,MR-V100,0,true:"
    )
    index = _index(vendor, devices)
    container = {"name": "c", "resources": {"limits": {"iluvatar.ai/MR-V100-vgpu": "2"}}}
    admitted = vendor.admit(container, {})
    assert admitted is not None
    pod = _pod("a", {"iluvatar.ai/MR-V100-vgpu": "2", **admitted.limits})
    placed = choose_devices(index, vendor.parse_pod(pod), "n")
    assert isinstance(placed, PodAssignment)
    record = vendor.bind_annotations(placed, bind_time=1)["hami.io/MR-V100-devices-allocated"]
    assert sorted(record.rstrip(";").rstrip(":").split(":")) == [
        "GPU-0,MR-V100,8192,100",
        "GPU-1,MR-V100,8192,100",
    ]


def test_a_moore_threads_container_splits_its_memory_over_its_gpus() -> None:
    vendor = mthreads_vendors({})
    capacity = {"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192"}
    index = _index(vendor, vendor.devices_from_capacity("n", capacity))
    container = {"name": "c", "resources": {"limits": {"mthreads.com/vgpu": "2"}}}
    admitted = vendor.admit(container, {})
    assert admitted is not None
    pod = _pod("a", {"mthreads.com/vgpu": "2", **admitted.limits})
    placed = choose_devices(index, vendor.parse_pod(pod), "n")
    assert isinstance(placed, PodAssignment)
    annotations = vendor.bind_annotations(placed, bind_time=1)
    entries = annotations["hami.io/mthreads-vgpu-devices-allocated"].rstrip(";").rstrip(":")
    assert sorted(entries.split(":")) == [
        "n-mthreads-0,Mthreads,49152,16",
        "n-mthreads-1,Mthreads,49152,16",
    ]
    assert sorted(annotations["mthreads.com/gpu-index"].split(",")) == ["0", "1"]
