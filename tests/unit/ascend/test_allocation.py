"""An Ascend chip's pod annotations: HAMi's PatchAnnotations literals (plain, ZeroCore,
VNPUCoreMode), the chip's grants only, every container's slot kept, and bad values."""

from __future__ import annotations

import json

import pytest

from vgpu_extender.domain import (
    AnnotationError,
    ContainerRequest,
    DeviceGrant,
    PodAssignment,
    PodRequest,
)
from vgpu_extender.vendors import hami_devices
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendChipVendor
from vgpu_extender.vendors.ascend.allocation_codec import bind_annotations, runtime_info

CHIPS = {chip.common_word: chip for chip in DEFAULT_CHIPS}
A910 = CHIPS["Ascend910A"]
B3 = CHIPS["Ascend910B3"]
B4 = CHIPS["Ascend910B4"]


def _grant(uuid: str, memory: int, cores: int, vendor: str = "Ascend910A") -> DeviceGrant:
    return DeviceGrant(uuid=uuid, memory_mib=memory, cores=cores, vendor=vendor)


def _pod(vendor: str, mode: str = "") -> PodRequest:
    ask = ContainerRequest("c", count=1, memory_mib=1, vendor=vendor, mode=mode)
    return PodRequest("u", containers=(ask,))


def test_hami_patch_annotations_literal() -> None:
    assignment = PodAssignment("node-a", ((_grant("device-0", 8738, 1),),))
    annotations = bind_annotations(
        assignment, bind_time=1700000000, request=_pod("Ascend910A"), chip=A910
    )
    assert annotations == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/Ascend910A-devices-to-allocate": "device-0,Ascend910A,8738,1:;",
        "hami.io/Ascend910A-devices-allocated": "device-0,Ascend910A,8738,1:;",
        "huawei.com/Ascend910A": '[{"UUID":"device-0","temp":"vir08","memory":8738,"core":1}]',
        "predicate-time": "1700000000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }


def test_hami_device_encoding_literal_with_its_type_word() -> None:
    # HAMi's test records the device type "Ascend"; the generic encoder writes a grant's own.
    grant = _grant("device-0", 8738, 1, vendor="Ascend")
    assert hami_devices.encode_containers([(grant,)], vendor="Ascend910A") == (
        "device-0,Ascend,8738,1:;"
    )


def test_zero_core_leaves_core_out() -> None:
    value = runtime_info([(_grant("device-0", 8738, 0),)], A910, hami_core=False)
    assert value == '[{"UUID":"device-0","temp":"vir08","memory":8738}]'


def test_vnpu_core_mode_names_no_template() -> None:
    grant = _grant("ascend-uuid-1", 8192, 5, vendor="Ascend910B4")
    assignment = PodAssignment("n", ((grant,),))
    annotations = bind_annotations(
        assignment, bind_time=1, request=_pod("Ascend910B4", mode="hami-core"), chip=B4
    )
    assert annotations["huawei.com/Ascend910B4"] == (
        '[{"UUID":"ascend-uuid-1","memory":8192,"core":5}]'
    )
    hard = bind_annotations(assignment, bind_time=1, request=_pod("Ascend910B4"), chip=B4)
    assert json.loads(hard["huawei.com/Ascend910B4"])[0]["temp"] == "vir05_1c_8g"


def test_a_whole_card_names_no_template_and_a_pod_without_request_is_hard_split() -> None:
    assignment = PodAssignment("n", ((_grant("d0", 65536, 0, "Ascend910B3"),),))
    annotations = bind_annotations(assignment, bind_time=1, request=None, chip=B3)
    assert annotations["huawei.com/Ascend910B3"] == '[{"UUID":"d0","memory":65536}]'
    partial = PodAssignment("n", ((_grant("d0", 16384, 0, "Ascend910B3"),),))
    annotations = bind_annotations(partial, bind_time=1, request=None, chip=B3)
    assert annotations["huawei.com/Ascend910B3"] == (
        '[{"UUID":"d0","temp":"vir05_1c_16g","memory":16384}]'
    )


def test_only_this_chips_grants_in_every_containers_slot() -> None:
    assignment = PodAssignment(
        "n",
        (
            (_grant("GPU-1", 4000, 30, "NVIDIA"),),
            (_grant("d1", 16384, 0, "Ascend910B3"), _grant("d2", 16384, 0, "Ascend910B3")),
            (_grant("GPU-2", 4000, 30, "NVIDIA"), _grant("d3", 32768, 0, "Ascend910B3")),
        ),
        init=(True, False, False),
    )
    annotations = bind_annotations(assignment, bind_time=5, request=None, chip=B3)
    devices = ";d1,Ascend910B3,16384,0:d2,Ascend910B3,16384,0:;d3,Ascend910B3,32768,0:;"
    assert annotations["hami.io/Ascend910B3-devices-allocated"] == devices
    assert [entry["UUID"] for entry in json.loads(annotations["huawei.com/Ascend910B3"])] == [
        "d1",
        "d2",
        "d3",
    ]
    vendor = AscendChipVendor(B3)
    assert vendor.encode_assignment(assignment) == devices
    decoded = vendor.decode_assignment(devices, init=assignment.init)
    assert decoded == tuple(
        tuple(g for g in grants if g.vendor == "Ascend910B3") for grants in assignment.containers
    )


def test_a_pod_without_this_chip_gets_nothing_from_it() -> None:
    assignment = PodAssignment("n", ((_grant("GPU-1", 4000, 30, "NVIDIA"),), ()))
    assert bind_annotations(assignment, bind_time=1, request=None, chip=B3) == {}
    assert AscendChipVendor(B3).bind_annotations(assignment, bind_time=1) == {}


def test_the_hami_core_mode_is_read_from_this_chips_asks() -> None:
    other = ContainerRequest("c", count=1, vendor="Ascend910A", mode="hami-core")
    mine = ContainerRequest("c", count=1, vendor="Ascend910B3", also=(other,))
    request = PodRequest("u", containers=(mine,))
    assignment = PodAssignment("n", ((_grant("d0", 16384, 0, "Ascend910B3"),),))
    annotations = bind_annotations(assignment, bind_time=1, request=request, chip=B3)
    assert '"temp"' in annotations["huawei.com/Ascend910B3"]


@pytest.mark.parametrize(
    ("assignment", "bind_time"),
    [
        (PodAssignment("", ((_grant("d", 1, 0, "Ascend910B3"),),)), 1),
        (PodAssignment("n", ((_grant("d", 1, 0, "Ascend910B3"),),)), -1),
        (PodAssignment("n", ((_grant("d", 1, 0, "Ascend910B3"),),)), True),
        (PodAssignment("n", ((_grant("d:x", 1, 0, "Ascend910B3"),),)), 1),
        (PodAssignment("n", ((_grant("d", -1, 0, "Ascend910B3"),),)), 1),
        (PodAssignment("n", ((_grant("d", 2**31, 0, "Ascend910B3"),),)), 1),
    ],
)
def test_bad_assignments_are_annotation_errors(assignment: PodAssignment, bind_time: int) -> None:
    with pytest.raises(AnnotationError):
        bind_annotations(assignment, bind_time=bind_time, request=None, chip=B3)


def test_hami_encoding_of_an_empty_first_container_decodes() -> None:
    grants = AscendChipVendor(B3).decode_assignment(";device-0,MLU,256000,1:;", init=(True, False))
    assert grants == ((), (DeviceGrant("device-0", 256000, 1, "MLU"),))


@pytest.mark.parametrize(
    ("value", "init"),
    [
        ("d,Ascend910B3,1,0:;", (False, False)),
        ("d,Ascend910B3,1:;", ()),
        ("d,,1,0:;", ()),
        (",Ascend910B3,1,0:;", ()),
        ("x,Ascend910B3,1,0:; d,Ascend910B3,1,0:;", ()),
        ("d,Ascend910B3,x,0:;", ()),
        ("d,Ascend910B3,-1,0:;", ()),
        ("d,Ascend910B3,1,99999999999:;", ()),
        ("d,Ascend910B3,1,0:d,Ascend910B3,1,0:;", ()),
        (5, ()),
    ],
)
def test_bad_device_annotations_are_annotation_errors(
    value: object, init: tuple[bool, ...]
) -> None:
    with pytest.raises(AnnotationError):
        AscendChipVendor(B3).decode_assignment(value, init=init)  # type: ignore[arg-type]
