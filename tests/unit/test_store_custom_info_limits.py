"""The store's bounds on a device's custom info, checked before anything is written."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.domain.device import CustomInfo
from vgpu_extender.store import StoreInputError
from vgpu_extender.store.limits import (
    CUSTOM_INFO_ENTRIES,
    CUSTOM_INFO_KEY,
    CUSTOM_INFO_TEXT,
    ValueTooLong,
    check_inventory,
)


def _node(custom_info: CustomInfo) -> NodeInventory:
    return NodeInventory(
        name="n",
        devices=(
            Device("GPU-0"),
            Device("npu-1", index=1, vendor="Ascend910B3", custom_info=custom_info),
        ),
    )


@pytest.mark.parametrize(
    "custom_info",
    [
        pytest.param((), id="none"),
        pytest.param((("NetworkID", 1),), id="ascend-network"),
        pytest.param(
            tuple((f"k{i:02d}", i) for i in range(CUSTOM_INFO_ENTRIES)), id="most-entries"
        ),
        pytest.param((("k" * CUSTOM_INFO_KEY, "v" * CUSTOM_INFO_TEXT),), id="longest-key-and-text"),
        pytest.param(
            (("big", 2**63 - 1), ("flag", False), ("ratio", -1.5), ("small", -(2**63))),
            id="kinds-at-their-bounds",
        ),
    ],
)
def test_custom_info_within_bounds_is_accepted(custom_info: CustomInfo) -> None:
    check_inventory(_node(custom_info))


@pytest.mark.parametrize(
    ("custom_info", "field", "words"),
    [
        pytest.param(
            tuple((f"k{i:02d}", i) for i in range(CUSTOM_INFO_ENTRIES + 1)),
            "devices[1].custom_info",
            f"has {CUSTOM_INFO_ENTRIES + 1} entries; at most {CUSTOM_INFO_ENTRIES}",
            id="too-many-entries",
        ),
        pytest.param(
            (("", 1),), "devices[1].custom_info", "key must be a non-empty string", id="empty-key"
        ),
        pytest.param(
            (("k" * (CUSTOM_INFO_KEY + 1), 1),),
            "devices[1].custom_info",
            f"custom info key is {CUSTOM_INFO_KEY + 1} characters long",
            id="long-key",
        ),
        pytest.param(
            (("a", 1), ("a", 2)), "devices[1].custom_info.a", "key is listed twice", id="twice"
        ),
        pytest.param(
            (("Name", "v" * (CUSTOM_INFO_TEXT + 1)),),
            "devices[1].custom_info.Name",
            f"custom info Name is {CUSTOM_INFO_TEXT + 1} characters long",
            id="long-text",
        ),
        pytest.param(
            (("x", float("nan")),), "devices[1].custom_info.x", "must be finite", id="nan"
        ),
        pytest.param(
            (("x", float("-inf")),), "devices[1].custom_info.x", "must be finite", id="infinity"
        ),
        pytest.param(
            (("x", 2**63),), "devices[1].custom_info.x", "outside 64 bits", id="int-too-big"
        ),
        pytest.param(
            (("x", [1]),),  # what a careless decoder could pass
            "devices[1].custom_info.x",
            "must be a number, boolean or string, not list",
            id="list",
        ),
    ],
)
def test_custom_info_out_of_bounds_is_refused_naming_device_and_field(
    custom_info: CustomInfo, field: str, words: str
) -> None:
    with pytest.raises(StoreInputError) as caught:
        check_inventory(_node(custom_info))
    assert caught.value.field == field
    assert "device npu-1 custom info" in str(caught.value)
    assert words in str(caught.value)


def test_a_long_key_or_text_is_a_value_too_long_with_its_limit() -> None:
    with pytest.raises(ValueTooLong) as caught:
        check_inventory(_node((("Name", "v" * (CUSTOM_INFO_TEXT + 1)),)))
    assert caught.value.limit == CUSTOM_INFO_TEXT
