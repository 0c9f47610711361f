"""``hami.io/node-register-<CW>`` as the Ascend plugin writes it: HAMi's test literal with
Go-cased keys, the plugin's shape byte for byte, the node's mode, the NetworkID rule, and
hostile values."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendChipVendor, AscendConfig
from vgpu_extender.vendors.ascend.inventory_codec import (
    decode_inventory,
    encode_inventory,
    network_id,
    node_mode,
)

A910 = next(chip for chip in DEFAULT_CHIPS if chip.common_word == "Ascend910A")
B3 = next(chip for chip in DEFAULT_CHIPS if chip.common_word == "Ascend910B3")
KEY = "hami.io/node-register-Ascend910B3"

#: HAMi's Test_GetNodeDevices literal: keys as Go's field names, not the json tags.
HAMI_LITERAL = (
    '[{"ID":"GPU-0","Count":4,"Devmem":8738,"Devcore":8,"Type":"huawei.com/Ascend910",'
    '"Numa":0,"Health":true}]'
)
#: The plugin's shape (npu.md 1.3), two chips of a 910B3 node.
PLUGIN_SHAPE = (
    '[{"id":"die0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,'
    '"custominfo":{"NetworkID":0}},{"id":"die1","index":1,"count":4,"devmem":65536,'
    '"devcore":20,"type":"Ascend910B3","health":true,"custominfo":{"NetworkID":0}}]'
)


def test_hami_literal_with_go_cased_keys() -> None:
    (device,) = decode_inventory(HAMI_LITERAL, A910)
    assert device == Device(
        uuid="GPU-0",
        index=0,
        count=4,
        memory_mib=8738,
        cores=8,
        type="huawei.com/Ascend910",
        numa=0,
        mode="vnpu",
        healthy=True,
        vendor="Ascend910A",
    )


def test_the_plugin_shape_decodes_and_encodes_byte_for_byte() -> None:
    devices = decode_inventory(PLUGIN_SHAPE, B3)
    assert [(d.uuid, d.index, d.custom_info) for d in devices] == [
        ("die0", 0, (("NetworkID", 0),)),
        ("die1", 1, (("NetworkID", 0),)),
    ]
    assert all(d.vendor == d.type == "Ascend910B3" for d in devices)
    assert isinstance(devices[0].custom("NetworkID"), int)
    assert encode_inventory(devices) == PLUGIN_SHAPE


def test_omitted_fields_are_zero_and_missing_health_is_unhealthy() -> None:
    (device,) = decode_inventory('[{"id":"die7"}]', B3)
    assert (device.index, device.count, device.memory_mib, device.cores, device.numa) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert device.healthy is False
    assert device.type == "Ascend910B3"  # what the plugin registers
    assert device.custom_info == ()


def test_a_later_key_wins_whatever_its_case() -> None:
    (device,) = decode_inventory('[{"id":"a","COUNT":2,"count":3,"Count":4}]', B3)
    assert device.count == 4


def test_custom_info_is_sorted_and_keeps_number_kinds() -> None:
    value = '[{"id":"a","custominfo":{"b":1.5,"NetworkID":1,"s":"x","t":true,"n":null,"o":{}}}]'
    (device,) = decode_inventory(value, B3)
    assert device.custom_info == (("NetworkID", 1), ("b", 1.5), ("s", "x"), ("t", True))


def test_encoding_custom_info_as_go_writes_float64() -> None:
    device = Device(
        "a", count=0, cores=0, healthy=False, custom_info=(("NetworkID", 1.0), ("x", 0.25))
    )
    assert encode_inventory([device]) == '[{"id":"a","custominfo":{"NetworkID":1,"x":0.25}}]'


def test_the_node_mode_comes_from_its_annotation_else_the_default() -> None:
    assert node_mode({"hami-vnpu-core": "true"}, default_core=False) == "hami-core"
    assert node_mode({"hami-vnpu-core": "false"}, default_core=True) == "vnpu"
    assert node_mode({"hami-vnpu-core": "True"}, default_core=True) == "vnpu"
    assert node_mode({}, default_core=True) == "hami-core"
    assert node_mode({}, default_core=False) == "vnpu"


def test_decode_node_reads_the_chips_key_and_the_mode() -> None:
    vendor = AscendChipVendor(B3, AscendConfig(chips=(B3,)))
    assert (
        vendor.decode_node(
            NodeFacts("node-a", annotations={"hami.io/node-register-Ascend910A": PLUGIN_SHAPE})
        )
        is None
    )
    devices = vendor.decode_node(
        NodeFacts("node-a", annotations={KEY: PLUGIN_SHAPE, "hami-vnpu-core": "true"})
    )
    assert devices is not None
    assert {d.mode for d in devices} == {"hami-core"}
    core_default = AscendChipVendor(B3, AscendConfig(chips=(B3,), hami_vnpu_core=True))
    assert {d.mode for d in core_default.decode_inventory(PLUGIN_SHAPE)} == {"hami-core"}
    with pytest.raises(InventoryError, match="no device found"):
        vendor.decode_node(NodeFacts("node-a", annotations={KEY: "[]"}))


@pytest.mark.parametrize(
    ("cw", "index", "want"),
    [
        ("Ascend910B3", 3, 0),
        ("Ascend910B3", 4, 1),
        ("Ascend910A", 0, 0),
        ("Ascend910A", 7, 1),
        ("Ascend910C", 100, 0),
        ("Ascend310P", 4, None),
    ],
)
def test_network_id_rule(cw: str, index: int, want: int | None) -> None:
    assert network_id(cw, index) == want


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "no device found"),
        ("  ", "no device found"),
        ("[]", "no device found"),
        ("null", "no device found"),
        ("[{", "not valid JSON"),
        ("{}", "JSON array"),
        ('"x"', "JSON array"),
        ('[{"id":"a","count":NaN}]', "not valid JSON"),
        ("[1]", "device #0"),
        ('[{"count":1}]', "'id'"),
        ('[{"id":""}]', "'id'"),
        ('[{"id":"a,b"}]', "'id'"),
        ('[{"id":" a"}]', "'id'"),
        ('[{"id":7}]', "'id'"),
        ('[{"id":"a","count":"4"}]', "device #0 (a): field 'count'"),
        ('[{"id":"a","count":4.0}]', "field 'count'"),
        ('[{"id":"a","count":true}]', "field 'count'"),
        ('[{"id":"a","count":-1}]', "field 'count'"),
        ('[{"id":"a","devmem":2147483648}]', "field 'devmem'"),
        ('[{"id":"a","devcore":1e999}]', "field 'devcore'"),
        ('[{"id":"a","index":-1}]', "field 'index'"),
        ('[{"id":"a","health":"true"}]', "field 'health'"),
        ('[{"id":"a","type":4}]', "field 'type'"),
        ('[{"id":"a","custominfo":[1]}]', "field 'custominfo'"),
        ('[{"id":"a","custominfo":{"NetworkID":1e999}}]', "NetworkID"),
        ('[{"id":"a"},{"ID":"a"}]', "more than once"),
        ("[" + "[" * 100000 + "]" * 100000 + "]", "JSON"),
    ],
)
def test_hostile_inventories(value: str, words: str) -> None:
    with pytest.raises(InventoryError) as caught:
        decode_inventory(value, B3)
    assert words in str(caught.value)


def test_a_non_string_value_is_an_inventory_error() -> None:
    with pytest.raises(InventoryError):
        decode_inventory(b"[]", B3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "device",
    [
        Device("a,b"),
        Device("a", count=-1),
        Device("a", memory_mib=2**31),
        Device("a", custom_info=(("NetworkID", float("nan")),)),
    ],
)
def test_unencodable_devices(device: Device) -> None:
    with pytest.raises(InventoryError):
        encode_inventory([device])
