"""npu-smi's text read: both recorded nodes, the chip map, the join and the chip table."""

from __future__ import annotations

import pytest

from device_plugins.ascend.chips import NpuChip, chip_config, chip_uuid, join_npu_smi
from device_plugins.ascend.npu_smi import NpuSmiError, parse_chip_map, parse_info
from device_plugins.discovery.base import MAX_UUID_LENGTH, DiscoveryError
from tests.device_plugins.ascend.support import B3, P310, fixture
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS


def test_the_910b3_table() -> None:
    chips = parse_info(fixture(B3, "info"))
    assert [(c.npu_id, c.chip_id) for c in chips] == [(i, 0) for i in range(8)]
    assert {c.name for c in chips} == {"910B3"}
    assert [c.healthy for c in chips] == [True] * 5 + [False] + [True] * 2
    assert chips[5].health == "Critical"
    # The HBM pair, not the (empty) Memory-Usage one; the process table is not a chip.
    assert {c.memory_total_mib for c in chips} == {65536}
    assert chips[6].memory_used_mib == 20791
    assert [c.bus_id for c in chips][:2] == ["0000:C1:00.0", "0000:C2:00.0"]
    assert {c.device_id for c in chips} == {None}


def test_the_310p_table_with_device_ids() -> None:
    chips = parse_info(fixture(P310, "info"))
    assert [(c.npu_id, c.chip_id, c.device_id) for c in chips] == [
        (1, 0, 0),
        (2, 0, 1),
        (4, 0, 2),
        (5, 0, 3),
    ]
    assert [c.health for c in chips] == ["OK", "OK", "Warning", "OK"]
    assert [c.healthy for c in chips] == [True, True, False, True]
    assert [c.memory_used_mib for c in chips] == [1417, 1420, 1415, 5388]
    assert {(c.name, c.memory_total_mib) for c in chips} == {("310P3", 21527)}


def test_the_chip_maps_skip_the_mcu() -> None:
    b3 = parse_chip_map(fixture(B3, "info-m"))
    assert [(c.npu_id, c.chip_id, c.logic_id) for c in b3] == [(i, 0, i) for i in range(8)]
    assert {c.chip_name for c in b3} == {"Ascend 910B3"}
    p310 = parse_chip_map(fixture(P310, "info-m"))
    assert [(c.npu_id, c.logic_id, c.chip_name) for c in p310] == [
        (1, 0, "Ascend 310P3"),
        (2, 1, "Ascend 310P3"),
        (4, 2, "Ascend 310P3"),
        (5, 3, "Ascend 310P3"),
    ]


def test_joined_chips_have_stable_ids_and_physical_ids() -> None:
    b3 = join_npu_smi(
        "node-a", parse_info(fixture(B3, "info")), parse_chip_map(fixture(B3, "info-m"))
    )
    assert [c.uuid for c in b3] == [f"node-a-npu-{i}" for i in range(8)]
    assert [c.physical_id for c in b3] == list(range(8))
    assert b3[5] == NpuChip("node-a-npu-5", "910B3", 5, 5, 65536, False, "0000:02:00.0")
    p310 = join_npu_smi(
        "n", parse_info(fixture(P310, "info")), parse_chip_map(fixture(P310, "info-m"))
    )
    # The Device column, not the NPU (card slot) ID.
    assert [(c.uuid, c.physical_id, c.logic_id) for c in p310] == [
        ("n-npu-0", 0, 0),
        ("n-npu-1", 1, 1),
        ("n-npu-2", 2, 2),
        ("n-npu-3", 3, 3),
    ]


def test_a_long_node_name_keeps_ids_short_stable_and_distinct() -> None:
    long_a = "gpu-pool-" + "a" * 70
    long_b = "gpu-pool-" + "a" * 69 + "b"
    ids = {chip_uuid(name, 7) for name in (long_a, long_b)}
    assert len(ids) == 2
    assert all(len(i) <= MAX_UUID_LENGTH and i.endswith("-npu-7") for i in ids)
    assert chip_uuid(long_a, 7) == chip_uuid(long_a, 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no NPU chip rows"),
        ("npu-smi: command not supported\n", "no NPU chip rows .*'npu-smi: command not"),
        (
            "| 0                         | 0000:C1:00.0  | 0  0 / 0  3378 / 65536 |\n",
            "line 1: a chip row before its NPU row",
        ),
        (
            "| 0     910B3   | OK     | 96.7  36  0 / 0 |\n| 0   | 0000:C1:00.0  | 0  NA |\n",
            r"line 2: no '<used> / <total>' memory",
        ),
    ],
)
def test_an_unreadable_table_is_one_line(text: str, message: str) -> None:
    with pytest.raises(NpuSmiError, match=message) as caught:
        parse_info(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NPU ID  Chip ID\n", "no 'Chip Logic ID' header"),
        ("NPU ID Chip ID Chip Logic ID Chip Name\n  0  zero  0  Ascend 910B3\n", "line 2"),
        ("NPU ID Chip ID Chip Logic ID Chip Name\n  0  1  -  Mcu\n", "no chip with a logic ID"),
    ],
)
def test_an_unreadable_chip_map_is_one_line(text: str, message: str) -> None:
    with pytest.raises(NpuSmiError, match=message):
        parse_chip_map(text)


def test_a_chip_missing_from_the_table_is_named() -> None:
    info = parse_info(fixture(B3, "info"))[:7]
    with pytest.raises(NpuSmiError, match=r"NPU 7 chip 0 \(logic ID 7\), which 'npu-smi info'"):
        join_npu_smi("n", info, parse_chip_map(fixture(B3, "info-m")))


def test_chips_map_to_the_chip_table_by_name() -> None:
    b3 = NpuChip("a", "910B3", 0, 0)
    assert chip_config([b3], DEFAULT_CHIPS).common_word == "Ascend910B3"
    assert chip_config([NpuChip("a", "Ascend 310P3", 0, 0)], DEFAULT_CHIPS).common_word == (
        "Ascend310P"
    )
    with pytest.raises(DiscoveryError, match=r"chip '910Z' is not in the Ascend chip table"):
        chip_config([NpuChip("a", "910Z", 0, 0)], DEFAULT_CHIPS)
    with pytest.raises(DiscoveryError, match="mixes Ascend chips 310P3, 910B3"):
        chip_config([b3, NpuChip("b", "310P3", 1, 1)], DEFAULT_CHIPS)
    with pytest.raises(DiscoveryError, match="no Ascend NPU"):
        chip_config([], DEFAULT_CHIPS)
