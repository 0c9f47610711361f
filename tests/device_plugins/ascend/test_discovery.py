"""Ascend discovery: npu-smi run and read, the static chip file, and the agent's backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from device_plugins.ascend.discovery import (
    AscendBackend,
    NpuSmiSource,
    StaticChipSource,
    run_tool,
)
from device_plugins.discovery.base import DiscoveryError
from tests.device_plugins.ascend.support import B3, P310, RecordedNpuSmi, backend, uuid
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, ChipConfig

STATIC = """
chips:
  - {uuid: die-b, chip_name: 910B3, physical_id: 3, logic_id: 1, healthy: false}
  - {uuid: die-a, chip_name: Ascend 910B3, physical_id: 0, bus_id: "0000:C1:00.0"}
"""


def chip(word: str) -> ChipConfig:
    return next(c for c in DEFAULT_CHIPS if c.common_word == word)


def test_npu_smi_is_asked_for_the_table_and_the_map() -> None:
    runner = RecordedNpuSmi(B3)
    chips = NpuSmiSource("node-a", binary="/usr/local/bin/npu-smi", run=runner).scan()
    assert len(chips) == 8
    assert runner.calls == [
        ["/usr/local/bin/npu-smi", "info"],
        ["/usr/local/bin/npu-smi", "info", "-m"],
    ]


def test_unreadable_output_is_a_discovery_error_in_one_line() -> None:
    source = NpuSmiSource("n", run=lambda args: "Error: no device found\n")
    with pytest.raises(DiscoveryError, match="cannot read npu-smi's output: no NPU chip rows"):
        source.scan()


def test_a_missing_binary_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match=r"not found: .*VGPU_DP_ASCEND_NPU_SMI") as caught:
        run_tool([str(tmp_path / "npu-smi"), "info"])
    assert "\n" not in str(caught.value)


def test_a_failing_tool_gives_its_first_error_line() -> None:
    code = "import sys; sys.stderr.write('\\ndcmi init failed\\nmore\\n'); sys.exit(3)"
    with pytest.raises(DiscoveryError, match=r"failed with status 3: dcmi init failed$"):
        run_tool([sys.executable, "-c", code])


def test_the_backend_numbers_chips_by_logic_id_as_the_chip_word() -> None:
    b3, flavour = backend(B3)
    devices = b3.discover()
    assert [d.index for d in devices] == list(range(8))
    assert [d.uuid for d in devices] == [uuid(i) for i in range(8)]
    assert {(d.vendor, d.model) for d in devices} == {("Ascend910B3", "Ascend910B3")}
    assert [d.healthy for d in devices] == [True] * 5 + [False] + [True] * 2
    assert b3.chips()[uuid(5)].physical_id == 5
    p310, _ = backend(P310)
    assert [d.healthy for d in p310.discover()] == [True, True, False, True]
    assert flavour.chip.common_word == "Ascend910B3"


def test_the_static_file(tmp_path: Path) -> None:
    path = tmp_path / "chips.yaml"
    path.write_text(STATIC)
    chips = StaticChipSource(path).scan()
    assert [(c.uuid, c.logic_id, c.physical_id, c.healthy) for c in chips] == [
        ("die-a", 0, 0, True),
        ("die-b", 1, 3, False),
    ]
    devices = AscendBackend(StaticChipSource(path), chip("Ascend910B3")).discover()
    # Without memory in the file, the chip's allocatable memory.
    assert [(d.uuid, d.index, d.memory_mib) for d in devices] == [
        ("die-a", 0, 65536),
        ("die-b", 1, 65536),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chips: [{uuid: a, physical_id: 0}]", r"chips\.0\.chip_name: Field required"),
        ("chips: [{uuid: a, chip_name: 910B3, physical_id: -1}]", "physical_id"),
        ("chips: [{uuid: a, chip_name: 910B3, physical_id: 0, numa: 1}]", "numa"),
        (
            "chips: [{uuid: a, chip_name: 910B3, physical_id: 0},"
            " {uuid: b, chip_name: 910B3, physical_id: 0, logic_id: 1}]",
            "two chips have physical ID 0",
        ),
        ("chips: [", "not valid YAML"),
    ],
)
def test_a_bad_static_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "chips.yaml"
    path.write_text(text)
    with pytest.raises(DiscoveryError, match=message) as caught:
        StaticChipSource(path).scan()
    assert "\n" not in str(caught.value)


def test_chips_that_are_not_the_served_chip_stop_discovery(tmp_path: Path) -> None:
    path = tmp_path / "chips.yaml"
    path.write_text(STATIC)
    served = AscendBackend(StaticChipSource(path), chip("Ascend310P"))
    with pytest.raises(DiscoveryError, match="die-a is a 'Ascend 910B3', not the '310P3'"):
        served.discover()
