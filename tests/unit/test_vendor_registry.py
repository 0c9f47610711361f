"""Vendors by name, and the NVIDIA config they are built from."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.vendors import (
    VENDORS,
    Vendor,
    VendorSet,
    create_vendor,
    create_vendor_set,
    create_vendors,
)
from vgpu_extender.vendors.ascend import AscendChipVendor
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor

HAMI_RESOURCES = frozenset(
    {
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "nvidia.com/priority",
    }
)

NAMES = ["nvidia", "NVIDIA", " Nvidia "]


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_create_vendor_by_name(name: str) -> None:
    vendor: Vendor = create_vendor(name)
    assert isinstance(vendor, NvidiaVendor)
    assert vendor.name == "NVIDIA"
    assert vendor.resource_names == HAMI_RESOURCES
    assert vendor.inventory_annotation == "hami.io/node-nvidia-register"
    assert vendor.cordon_annotation == "hami.io/device-cordon"
    assert vendor.node_annotation == "hami.io/vgpu-node"
    assert vendor.assignment_annotation == "hami.io/vgpu-devices-allocated"


def test_settings_rename_resources() -> None:
    vendor = create_vendor("nvidia", {"count_resource": "example.com/vgpu", "vendor_word": "EX"})
    assert "example.com/vgpu" in vendor.resource_names
    assert "nvidia.com/gpu" not in vendor.resource_names
    assert vendor.name == "EX"


def test_unknown_vendor_lists_known_ones() -> None:
    known = ", ".join(sorted(VENDORS))
    assert known == (
        "amd, ascend, awsneuron, cambricon, enflame, hygon, iluvatar, kunlun, metax, "
        "mthreads, nvidia"
    )
    with pytest.raises(ValueError, match=f"unknown vendor 'intel'; known: {known}"):
        create_vendor("intel")


def test_a_factory_of_several_vendors_builds_one_per_chip() -> None:
    chips = create_vendors("ascend")
    assert all(isinstance(v, AscendChipVendor) for v in chips)
    assert [v.name for v in chips] == [
        "Ascend910A",
        "Ascend910B2",
        "Ascend910B3",
        "Ascend910B4-1",
        "Ascend910B4",
        "Ascend310P",
        "Ascend910C",
    ]
    with pytest.raises(ValueError, match="'ascend' has 7 members; build them as a set"):
        create_vendor("ascend")


def test_a_vendor_set_is_named_by_a_comma_separated_setting() -> None:
    vendors = create_vendor_set(" NVIDIA , ascend ")
    assert isinstance(vendors, VendorSet)
    assert vendors.names[:2] == ("NVIDIA", "Ascend910A") and len(vendors.names) == 8
    assert vendors.primary.name == "NVIDIA"
    assert "huawei.com/Ascend910B3-memory" in vendors.resource_names
    assert "nvidia.com/gpu" in vendors.resource_names
    assert vendors.shares.of("Ascend910C").noun == "npu"
    assert vendors.shares.of("NVIDIA").noun == "gpu"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("nvidia,intel", "unknown vendor 'intel'"),
        ("nvidia,,ascend", "no vendor named"),
        ("nvidia,NVIDIA", "named twice"),
        ("", "no vendor named"),
    ],
    ids=["unknown", "empty-part", "twice", "empty"],
)
def test_bad_vendor_lists_are_refused(names: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_vendor_set(names)


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        VENDORS["other"] = VENDORS["nvidia"]  # type: ignore[index]


BAD_SETTINGS = [
    ("unknown-key", {"default_memory": 1}, "unknown NVIDIA vendor setting.*default_memory"),
    ("cores-over-100", {"default_cores": 101}, "default_cores.*101"),
    ("negative-memory", {"default_memory_mib": -1}, "default_memory_mib.*-1"),
    ("zero-split", {"split_count": 0}, "split_count.*0"),
    ("bool-split", {"split_count": True}, "split_count"),
    ("empty-name", {"memory_resource": " "}, "memory_resource"),
    ("name-not-string", {"cores_resource": 5}, "cores_resource"),
    ("policies-as-string", {"known_node_policies": "binpack"}, "known_node_policies"),
    ("vendor-word-separator", {"vendor_word": "NV;IDIA"}, "vendor_word"),
]


@pytest.mark.parametrize(
    ("settings", "message"), [c[1:] for c in BAD_SETTINGS], ids=[c[0] for c in BAD_SETTINGS]
)
def test_bad_settings_fail_when_the_vendor_is_built(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_vendor("nvidia", settings)


def test_policy_sets_accept_any_iterable_and_are_frozen() -> None:
    config = NvidiaConfig(known_device_policies=["binpack", "custom"])  # type: ignore[arg-type]
    assert config.known_device_policies == frozenset({"binpack", "custom"})
    assert NvidiaConfig().known_node_policies == frozenset(
        {"binpack", "spread", "fragmentation", "label-priority"}
    )
