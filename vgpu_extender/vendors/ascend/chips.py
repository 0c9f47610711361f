"""Huawei Ascend chips as HAMi configures them (the ``vnpus:`` entries of
``device-config.yaml``), and the seven chips of HAMi v2.10's chart.

HAMi registers each chip as its own device type keyed by its ``commonWord`` (CW): every
resource name and annotation key of a chip derives from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Template:
    """One vNPU template of a hard-split chip: its name, memory (MiB) and AI cores/CPUs."""

    name: str
    memory: int
    ai_core: int = 0
    ai_cpu: int = 0


@dataclass(frozen=True, slots=True)
class ChipConfig:
    """One chip's ``VNPUConfig``. ``templates`` are kept sorted by memory, ascending, as
    HAMi sorts them at start-up (``trim_memory`` walks them in that order)."""

    common_word: str
    chip_name: str
    resource_name: str
    resource_memory_name: str
    resource_core_name: str
    memory_allocatable: int
    memory_capacity: int
    memory_factor: int = 1
    ai_core: int = 0
    ai_cpu: int = 0
    templates: tuple[Template, ...] = ()
    super_pod: bool = False
    runtime_class_name: str = ""
    overwrite_env: bool = False

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.templates, key=lambda t: t.memory))
        if ordered != self.templates:
            object.__setattr__(self, "templates", ordered)

    @property
    def slots(self) -> int:
        """vNPUs one chip holds (the plugin's ``count``): allocatable memory over the
        smallest template's, or 1 with no templates."""
        if not self.templates or self.templates[0].memory <= 0:
            return 1
        return max(1, self.memory_allocatable // self.templates[0].memory)

    @property
    def is_910c(self) -> bool:
        """910C chips come in modules of two NPUs (``Index // 2``), placed in pairs."""
        return self.common_word == "Ascend910C"

    @property
    def has_network_topology(self) -> bool:
        """Whether the plugin registers a ``NetworkID`` for the chip's devices."""
        return self.common_word.startswith("Ascend910")

    def trim_memory(self, memory_mib: int) -> tuple[int, str]:
        """HAMi's ``trimMemory``: the smallest template holding ``memory_mib`` (its memory
        and name), else the whole card (``memory_allocatable``, no name) when it is within
        the card's capacity, else ``(0, "")``: the request cannot be met."""
        for template in self.templates:
            if memory_mib <= template.memory:
                return template.memory, template.name
        if memory_mib <= self.memory_capacity:
            return self.memory_allocatable, ""
        return 0, ""


def _chip(
    cw: str,
    chip_name: str,
    memory: int,
    ai_core: int,
    ai_cpu: int,
    templates: tuple[Template, ...],
    *,
    capacity: int | None = None,
    super_pod: bool = False,
) -> ChipConfig:
    return ChipConfig(
        common_word=cw,
        chip_name=chip_name,
        resource_name=f"huawei.com/{cw}",
        resource_memory_name=f"huawei.com/{cw}-memory",
        resource_core_name=f"huawei.com/{cw}-core",
        memory_allocatable=memory,
        memory_capacity=memory if capacity is None else capacity,
        ai_core=ai_core,
        ai_cpu=ai_cpu,
        templates=templates,
        super_pod=super_pod,
    )


_B3_TEMPLATES = (Template("vir05_1c_16g", 16384, 5, 1), Template("vir10_3c_32g", 32768, 10, 3))

#: The chips of HAMi v2.10's chart (``device-configmap.yaml``), in its order. 910C has
#: no ``memoryFactor`` there, which HAMi reads as "no scaling", as is 1.
DEFAULT_CHIPS: tuple[ChipConfig, ...] = (
    _chip(
        "Ascend910A",
        "910A",
        32768,
        30,
        0,
        (
            Template("vir02", 2184, 2),
            Template("vir04", 4369, 4),
            Template("vir08", 8738, 8),
            Template("vir16", 17476, 16),
        ),
    ),
    _chip(
        "Ascend910B2",
        "910B2",
        65536,
        24,
        6,
        (
            Template("vir03_1c_8g", 8192, 3, 1),
            Template("vir06_1c_16g", 16384, 6, 1),
            Template("vir12_3c_32g", 32768, 12, 3),
        ),
    ),
    _chip("Ascend910B3", "910B3", 65536, 20, 7, _B3_TEMPLATES),
    _chip("Ascend910B4-1", "910B4-1", 65536, 20, 7, _B3_TEMPLATES),
    _chip(
        "Ascend910B4",
        "910B4",
        32768,
        20,
        7,
        (Template("vir05_1c_8g", 8192, 5, 1), Template("vir10_3c_16g", 16384, 10, 3)),
    ),
    _chip(
        "Ascend310P",
        "310P3",
        21527,
        8,
        7,
        (
            Template("vir01", 3072, 1, 1),
            Template("vir02", 6144, 2, 2),
            Template("vir04", 12288, 4, 4),
        ),
        capacity=24576,
    ),
    _chip("Ascend910C", "Ascend910", 65536, 20, 7, _B3_TEMPLATES, super_pod=True),
)
