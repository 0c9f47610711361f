"""Devices from a node's pool of cores and memory units, as HAMi reads capacity."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors import hami_capacity

POOL = hami_capacity.CorePool(
    cores_resource="x/core",
    memory_resource="x/memory",
    memory_unit_mib=512,
    cores_per_device=16,
    slots=100,
    word="X",
    device_id=lambda node, index: f"{node}-x-{index}",
    noun="card",
)


def test_one_device_per_started_share_of_cores_with_the_memory_spread_by_cores() -> None:
    devices = hami_capacity.devices("n", {"x/core": "20", "x/memory": "10"}, POOL)
    # 10 * 512 * 16 // 20 MiB each; 20 cores start a second device.
    assert devices == tuple(
        Device(uuid=f"n-x-{i}", index=i, count=100, memory_mib=4096, cores=16, type="X", vendor="X")
        for i in range(2)
    )


def test_no_cores_is_no_device_whatever_the_memory() -> None:
    assert hami_capacity.devices("n", {"x/memory": "10"}, POOL) == ()
    assert hami_capacity.devices("n", {"x/core": "0", "x/memory": "10"}, POOL) == ()


def test_a_device_memory_over_int32_is_refused_naming_the_device() -> None:
    with pytest.raises(InventoryError, match="per card, over int32"):
        hami_capacity.devices("n", {"x/core": "16", "x/memory": "4194304"}, POOL)


def test_a_capacity_that_is_not_whole_is_an_inventory_error_naming_it() -> None:
    with pytest.raises(InventoryError, match=r"^node capacity x/core: "):
        hami_capacity.integer({"x/core": "1.5"}, "x/core")
    assert hami_capacity.integer({}, "x/core") == 0


def test_whole_cards_are_one_per_unit_of_the_count() -> None:
    cards = hami_capacity.whole_cards(
        "n", {"x/gpu": "2"}, "x/gpu", tag="x", memory_mib=1024, cores=100, word="X"
    )
    assert cards == tuple(
        Device(uuid=f"n-x-{i}", index=i, count=1, memory_mib=1024, cores=100, type="X", vendor="X")
        for i in range(2)
    )
    none = hami_capacity.whole_cards("n", {}, "x/gpu", tag="x", memory_mib=1, cores=1, word="X")
    assert none == ()
    with pytest.raises(InventoryError, match="x/gpu"):
        hami_capacity.whole_cards(
            "n", {"x/gpu": "two"}, "x/gpu", tag="x", memory_mib=1, cores=1, word="X"
        )
