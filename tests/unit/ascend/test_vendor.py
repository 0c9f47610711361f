"""Each configured chip is one ``Vendor``: its names derive from its CommonWord, its
words are HAMi's reason constants, and it reads and writes through its own codecs."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import NEUTRAL_WORDING, DeviceGrant, PodAssignment, Reason, Rejection
from vgpu_extender.vendors import AdmissionNames, Vendor
from vgpu_extender.vendors.ascend import AscendChipVendor, ascend_vendors
from vgpu_extender.vendors.ascend.wording import ASCEND_WORDING

B3_ENTRY = {
    "commonWord": "Ascend910B3",
    "resourceName": "huawei.com/Ascend910B3",
    "resourceMemoryName": "huawei.com/Ascend910B3-memory",
    "memoryAllocatable": 65536,
    "templates": [{"name": "vir05_1c_16g", "memory": 16384}],
}


def _b3() -> AscendChipVendor:
    return next(v for v in ascend_vendors({}) if v.name == "Ascend910B3")


def test_one_vendor_per_chip_of_the_chart() -> None:
    names = [vendor.name for vendor in ascend_vendors({})]
    assert names == [
        "Ascend910A",
        "Ascend910B2",
        "Ascend910B3",
        "Ascend910B4-1",
        "Ascend910B4",
        "Ascend310P",
        "Ascend910C",
    ]
    (only,) = ascend_vendors({"vnpus": {"hamiVnpuCore": True, "configs": [B3_ENTRY]}})
    assert only.name == "Ascend910B3"
    assert only.config.hami_vnpu_core is True
    with pytest.raises(ValueError, match="memoryAllocatable"):
        ascend_vendors({"vnpus": [{**B3_ENTRY, "memoryAllocatable": "x"}]})


def test_it_is_a_vendor_with_the_chips_names() -> None:
    vendor: Vendor = _b3()
    assert vendor.inventory_annotation == "hami.io/node-register-Ascend910B3"
    assert vendor.assignment_annotation == "hami.io/Ascend910B3-devices-allocated"
    assert vendor.node_annotation == "hami.io/vgpu-node"
    assert vendor.cordon_annotation == "hami.io/Ascend910B3-device-cordon"
    assert vendor.node_keys == ("hami.io/node-register-Ascend910B3", "hami-vnpu-core")
    assert vendor.resource_names == frozenset(
        {"huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory", "huawei.com/Ascend910B3-core"}
    )
    assert vendor.admission == AdmissionNames(
        count="huawei.com/Ascend910B3",
        memory="huawei.com/Ascend910B3-memory",
        cores="huawei.com/Ascend910B3-core",
    )
    assert vendor.share.noun == "npu"
    assert vendor.wording is ASCEND_WORDING


def test_a_chip_without_a_core_resource_manages_two_names() -> None:
    (vendor,) = ascend_vendors({"vnpus": [B3_ENTRY]})
    assert vendor.resource_names == frozenset(
        {"huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory"}
    )
    assert vendor.admission.cores is None


def test_parse_and_bind_through_the_vendor() -> None:
    vendor = _b3()
    pod = {
        "metadata": {"uid": "u", "annotations": {"huawei.com/vnpu-mode": "hami-core"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {
                            "huawei.com/Ascend910B3": "1",
                            "huawei.com/Ascend910B3-memory": "8192",
                            "huawei.com/Ascend910B3-core": "25",
                        }
                    },
                }
            ]
        },
    }
    request = vendor.parse_pod(pod)
    (ask,) = request.containers
    assert (ask.vendor, ask.mode, ask.memory_mib, ask.cores) == (
        "Ascend910B3",
        "hami-core",
        8192,
        25,
    )
    assignment = PodAssignment("n", ((DeviceGrant("d0", 8192, 25, "Ascend910B3"),),))
    annotations = vendor.bind_annotations(assignment, bind_time=9, request=request)
    assert annotations["huawei.com/Ascend910B3"] == '[{"UUID":"d0","memory":8192,"core":25}]'
    assert vendor.decode_assignment(vendor.encode_assignment(assignment)) == assignment.containers


def test_inventory_round_trip_and_cordon() -> None:
    vendor = _b3()
    value = '[{"id":"d0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]'
    assert vendor.encode_inventory(vendor.decode_inventory(value)) == value
    assert vendor.decode_cordon(" d0, ,d1") == frozenset({"d0", "d1"})


def test_npu_words_are_hamis_reason_constants_and_unique() -> None:
    texts = ASCEND_WORDING.texts
    assert set(texts) == set(Reason) == set(NEUTRAL_WORDING.texts)
    values = list(texts.values())
    assert len(set(values)) == len(values)
    for text in values:
        assert "%" not in text
        assert not any(other != text and other.startswith(text) for other in values), text
    # HAMi's constants (pkg/device/common/common.go) where HAMi has one.
    assert {reason: texts[reason] for reason in HAMI_WORDS} == HAMI_WORDS
    # The rest stay NPU words, not the neutral "device" ones.
    assert all("npu" in texts[r] for r in (Reason.NO_DEVICES, Reason.CORDONED, Reason.CONFLICTED))


HAMI_WORDS = {
    Reason.SLOTS: "CardTimeSlicingExhausted",
    Reason.MEMORY: "CardInsufficientMemory",
    Reason.CORES: "CardInsufficientCore",
    Reason.EXCLUSIVE: "ExclusiveDeviceAllocateConflict",
    Reason.NO_COMPUTE: "CardComputeUnitsExhausted",
    Reason.UNHEALTHY: "CardNotHealth",
    Reason.TYPE_MISMATCH: "CardTypeMismatch",
    Reason.UUID_MISMATCH: "CardUuidMismatch",
    Reason.NUMA: "NumaNotFit",
    Reason.NOT_ENOUGH_DEVICES: "NodeInsufficientDevice",
    Reason.MODE_MISMATCH: "ModeNotFit",
    Reason.COMBINATION: "AllocatedCardsInsufficientRequest",
}


def test_a_memory_rejection_reads_as_hamis_with_numbers() -> None:
    text = Rejection(Reason.MEMORY, 16384, 8192).message(ASCEND_WORDING)
    assert text == "CardInsufficientMemory: need 16384 MiB, best free 8192 MiB"
