"""HAMi's legacy node inventory text (``DecodeNodeDevices``): 7 and 9 fields, HAMi's
Hygon and Iluvatar literals, the errors HAMi's tests expect, hostile input, and the
9-field encoding reading back."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors.hami_node_csv import decode_devices, encode_devices


def test_nine_fields_carry_index_and_mode() -> None:
    (device,) = decode_devices("test-0,1,1024,100,DCU,0,true,0,test:", vendor="DCU")
    assert device == Device(
        uuid="test-0",
        index=0,
        count=1,
        memory_mib=1024,
        cores=100,
        type="DCU",
        numa=0,
        mode="test",
        healthy=True,
        vendor="DCU",
    )


def test_seven_fields_are_index_0_and_hami_core() -> None:
    value = "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae,10,8192,100,MR-V100,0,true:"
    (device,) = decode_devices(value, vendor="MR-V100")
    assert (device.uuid, device.count, device.memory_mib, device.cores) == (
        "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae",
        10,
        8192,
        100,
    )
    assert (device.type, device.index, device.mode, device.healthy) == (
        "MR-V100",
        0,
        "hami-core",
        True,
    )


def test_the_dcu_plugins_shape() -> None:
    value = (
        "DCU-TPXS320016070601,4,65520,100,DCU-K100_AI,0,true,0,hami:"
        "DCU-TPXS320016070602,4,65520,100,DCU-K100_AI,1,false,1,hami:"
    )
    devices = decode_devices(value, vendor="DCU")
    assert [(d.uuid, d.index, d.numa, d.healthy) for d in devices] == [
        ("DCU-TPXS320016070601", 0, 0, True),
        ("DCU-TPXS320016070602", 1, 1, False),
    ]


@pytest.mark.parametrize(
    "value",
    [
        ":",
        "",
        "test-0,1,1024,100,DCU:",
        "a,1,1,1,T,0,true,0:",
        "a,1,1,1,T,0,yes:",
        "a,x,1,1,T,0,true:",
        "a,1,-5,1,T,0,true:",
        "a,1,1,99999999999,T,0,true:",
        "a,1,1,1,T,0,true:a,1,1,1,T,0,true:",
        " a,1,1,1,T,0,true:",
        "junk:a,1,1,1,T,0,true:",
    ],
    ids=[
        "colon only",
        "empty",
        "five fields (HAMi's test)",
        "eight fields",
        "bad boolean",
        "bad count",
        "negative memory",
        "cores over int32",
        "repeated id",
        "padded id",
        "segment without fields",
    ],
)
def test_what_cannot_be_read_is_an_error(value: str) -> None:
    with pytest.raises(InventoryError):
        decode_devices(value, vendor="DCU")


def test_a_non_string_is_an_error() -> None:
    with pytest.raises(InventoryError):
        decode_devices(5, vendor="DCU")  # type: ignore[arg-type]


def test_the_encoding_reads_back() -> None:
    devices = (
        Device("DCU-1", 0, 4, 65520, 100, "DCU-K100_AI", 0, "hami", True, "DCU"),
        Device("DCU-2", 1, 4, 65520, 100, "DCU-K100_AI", 1, "hami", False, "DCU"),
    )
    text = encode_devices(devices)
    assert text == (
        "DCU-1,4,65520,100,DCU-K100_AI,0,true,0,hami:DCU-2,4,65520,100,DCU-K100_AI,1,false,1,hami:"
    )
    assert decode_devices(text, vendor="DCU") == devices


@pytest.mark.parametrize(
    "device",
    [
        Device("a,b", vendor="DCU"),
        Device("", vendor="DCU"),
        Device("a", type="x:y", vendor="DCU"),
        Device("a", count=-1, vendor="DCU"),
    ],
    ids=["comma in id", "empty id", "colon in type", "negative count"],
)
def test_what_cannot_be_written_is_an_error(device: Device) -> None:
    with pytest.raises(InventoryError):
        encode_devices((device,))
