"""The chip table of HAMi v2.10's chart and the ``vnpus:`` settings in both of HAMi's
shapes, with bad values named."""

from __future__ import annotations

import pytest

from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendConfig, ChipConfig, Template

B3_ENTRY = {
    "chipName": "910B3",
    "commonWord": "Ascend910B3",
    "resourceName": "huawei.com/Ascend910B3",
    "resourceMemoryName": "huawei.com/Ascend910B3-memory",
    "resourceCoreName": "huawei.com/Ascend910B3-core",
    "memoryAllocatable": 65536,
    "memoryCapacity": 65536,
    "memoryFactor": 1,
    "aiCore": 20,
    "aiCPU": 7,
    "topologyPairs": [[0, 1]],  # in HAMi's own test config; no struct reads it
    "templates": [
        {"name": "vir10_3c_32g", "memory": 32768, "aiCore": 10, "aiCPU": 3},
        {"name": "vir05_1c_16g", "memory": 16384, "aiCore": 5, "aiCPU": 1},
    ],
}


def _by_word() -> dict[str, ChipConfig]:
    return {chip.common_word: chip for chip in DEFAULT_CHIPS}


def test_the_chart_has_seven_chips_with_the_tables_slots() -> None:
    slots = {chip.common_word: chip.slots for chip in DEFAULT_CHIPS}
    assert slots == {
        "Ascend910A": 15,
        "Ascend910B2": 8,
        "Ascend910B3": 4,
        "Ascend910B4-1": 4,
        "Ascend910B4": 4,
        "Ascend310P": 7,
        "Ascend910C": 4,
    }


def test_chip_names_resources_and_memory_follow_the_chart() -> None:
    chips = _by_word()
    p310 = chips["Ascend310P"]
    assert (p310.chip_name, p310.memory_allocatable, p310.memory_capacity) == (
        "310P3",
        21527,
        24576,
    )
    c = chips["Ascend910C"]
    assert (c.chip_name, c.super_pod) == ("Ascend910", True)
    assert all(not chip.super_pod for chip in DEFAULT_CHIPS if chip is not c)
    a = chips["Ascend910A"]
    assert (a.resource_name, a.resource_memory_name, a.resource_core_name) == (
        "huawei.com/Ascend910A",
        "huawei.com/Ascend910A-memory",
        "huawei.com/Ascend910A-core",
    )
    assert [t.name for t in a.templates] == ["vir02", "vir04", "vir08", "vir16"]
    assert chips["Ascend910B2"].templates[0] == Template("vir03_1c_8g", 8192, 3, 1)


def test_templates_are_sorted_by_memory_and_slots_use_the_smallest() -> None:
    chip = ChipConfig(
        "X",
        "x",
        "r",
        "r-memory",
        "",
        10000,
        10000,
        templates=(Template("b", 5000), Template("a", 3000)),
    )
    assert [t.name for t in chip.templates] == ["a", "b"]
    assert chip.slots == 3
    assert ChipConfig("X", "x", "r", "r-memory", "", 100, 100).slots == 1


@pytest.mark.parametrize(
    ("cw", "asked", "want"),
    [
        ("Ascend910A", 2000, (2184, "vir02")),
        ("Ascend910A", 8738, (8738, "vir08")),
        ("Ascend910A", 20000, (32768, "")),
        ("Ascend910A", 40000, (0, "")),
        ("Ascend310P", 3500, (6144, "vir02")),
        ("Ascend310P", 20000, (21527, "")),
        ("Ascend310P", 24576, (21527, "")),
        ("Ascend310P", 24577, (0, "")),
    ],
)
def test_trim_memory(cw: str, asked: int, want: tuple[int, str]) -> None:
    assert _by_word()[cw].trim_memory(asked) == want


def test_no_vnpus_is_the_chart() -> None:
    config = AscendConfig.from_mapping({})
    assert config.chips == DEFAULT_CHIPS
    assert config.hami_vnpu_core is False


def test_the_v2_9_shape_with_hami_vnpu_core() -> None:
    config = AscendConfig.from_mapping({"vnpus": {"hamiVnpuCore": True, "configs": [B3_ENTRY]}})
    assert config.hami_vnpu_core is True
    (chip,) = config.chips
    assert chip.common_word == "Ascend910B3"
    assert [t.name for t in chip.templates] == ["vir05_1c_16g", "vir10_3c_32g"]
    assert chip == _by_word()["Ascend910B3"]


def test_the_pre_v2_9_plain_list_without_core_resources() -> None:
    old = {k: v for k, v in B3_ENTRY.items() if k != "resourceCoreName"}
    old.update(commonWord="Ascend910B", resourceName="huawei.com/Ascend910B")
    config = AscendConfig.from_mapping({"vnpus": [old]})
    (chip,) = config.chips
    assert (chip.common_word, chip.resource_name, chip.resource_core_name) == (
        "Ascend910B",
        "huawei.com/Ascend910B",
        "",
    )
    assert config.hami_vnpu_core is False


def test_yaml_text_of_the_section_or_the_whole_file() -> None:
    text = (
        "vnpus:\n  hamiVnpuCore: true\n  configs:\n  - commonWord: Ascend910B4\n"
        "    resourceName: huawei.com/Ascend910B4\n"
        "    resourceMemoryName: huawei.com/Ascend910B4-memory\n"
        "    memoryAllocatable: 32768\n"
    )
    whole = AscendConfig.from_mapping({"vnpus": text})
    assert whole.hami_vnpu_core is True
    assert whole.chips[0].common_word == "Ascend910B4"
    assert whole.chips[0].memory_capacity == 32768


def test_the_global_setting_overrides_the_section() -> None:
    settings = {"vnpus": {"hamiVnpuCore": True, "configs": [B3_ENTRY]}, "hami_vnpu_core": "false"}
    assert AscendConfig.from_mapping(settings).hami_vnpu_core is False
    assert AscendConfig.from_mapping({"hami_vnpu_core": True}).hami_vnpu_core is True


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"vnpu": []}, "vnpu"),
        ({"vnpus": {"configs": "Ascend910B3"}}, "vnpus.configs"),
        ({"vnpus": [42]}, "vnpus[0]"),
        ({"vnpus": [{**B3_ENTRY, "commonWord": "Ascend,910"}]}, "'Ascend,910'"),
        ({"vnpus": [{**B3_ENTRY, "commonWord": ""}]}, "commonWord"),
        ({"vnpus": [{**B3_ENTRY, "memoryAllocatable": "64Gi"}]}, ("memoryAllocatable", "'64Gi'")),
        ({"vnpus": [{**B3_ENTRY, "memoryAllocatable": -1}]}, ("memoryAllocatable", "-1")),
        ({"vnpus": [{**B3_ENTRY, "memoryAllocatable": 2**40}]}, "memoryAllocatable"),
        ({"vnpus": [{**B3_ENTRY, "memoryFactor": True}]}, ("memoryFactor", "True")),
        ({"vnpus": [{**B3_ENTRY, "aiCore": 1.5}]}, ("aiCore", "1.5")),
        ({"vnpus": [{**B3_ENTRY, "resourceName": ""}]}, "resourceName"),
        ({"vnpus": [{**B3_ENTRY, "superPod": "yes"}]}, ("superPod", "'yes'")),
        (
            {"vnpus": [{**B3_ENTRY, "templates": [{"name": "t", "memory": 0}]}]},
            "templates[0].memory",
        ),
        ({"vnpus": [{**B3_ENTRY, "templates": {"name": "t"}}]}, "templates"),
        ({"vnpus": [B3_ENTRY, B3_ENTRY]}, "more than once"),
        ({"vnpus": "vnpus: [unclosed"}, "YAML"),
        ({"hami_vnpu_core": "maybe"}, ("hami_vnpu_core", "'maybe'")),
    ],
)
def test_bad_settings_name_the_key_and_value(
    settings: dict[str, object], named: str | tuple[str, ...]
) -> None:
    with pytest.raises(ValueError) as caught:
        AscendConfig.from_mapping(settings)
    for part in (named,) if isinstance(named, str) else named:
        assert part in str(caught.value)
