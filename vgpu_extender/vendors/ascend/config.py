"""The Ascend vendor's settings: HAMi's ``vnpus:`` section of ``device-config.yaml``.

Both shapes HAMi has had are read: v2.9+ ``{hamiVnpuCore: bool, configs: [...]}`` and the
plain list of chip entries before it. Chip entries use HAMi's camelCase keys and, as in
HAMi, unknown keys in them are ignored (HAMi's own test config carries ``topologyPairs``).
Bad values raise ``ValueError`` naming the key and the value, so a bad ConfigMap fails
at start-up rather than on the first pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from vgpu_extender.vendors import hami_config
from vgpu_extender.vendors.ascend.chips import DEFAULT_CHIPS, ChipConfig, Template

_INT32_MAX = 2**31 - 1
_SETTINGS = frozenset({"vnpus", "hami_vnpu_core"})


@dataclass(frozen=True, slots=True)
class AscendConfig:
    """The configured chips (one vendor each) and the global hami-core default for nodes
    without a ``hami-vnpu-core`` annotation."""

    chips: tuple[ChipConfig, ...] = DEFAULT_CHIPS
    hami_vnpu_core: bool = False

    def chip(self, common_word: str) -> ChipConfig:
        for chip in self.chips:
            if chip.common_word == common_word:
                return chip
        raise KeyError(common_word)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> AscendConfig:
        """From the vendor's settings: ``vnpus`` (HAMi's section: a mapping, a list, or
        the YAML text of either or of a whole ``device-config.yaml``) and
        ``hami_vnpu_core`` (overrides ``vnpus.hamiVnpuCore``)."""
        if not isinstance(settings, Mapping):
            raise ValueError(f"Ascend settings must be a mapping: {settings!r}")
        unknown = sorted(str(key) for key in settings if key not in _SETTINGS)
        if unknown:
            raise ValueError(
                f"unknown Ascend vendor setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_SETTINGS))}"
            )
        chips = DEFAULT_CHIPS
        core = False
        raw = settings.get("vnpus")
        if isinstance(raw, str):
            raw = _yaml(raw)
        if raw is not None:
            entries: object = raw
            if isinstance(raw, Mapping):
                core = hami_config.go_bool("vnpus.hamiVnpuCore", raw.get("hamiVnpuCore", False))
                entries = raw.get("configs")
            if not isinstance(entries, Sequence) or isinstance(entries, str):
                raise ValueError(f"vnpus.configs must be a list of chip entries: {entries!r}")
            chips = tuple(_chip(f"vnpus[{i}]", entry) for i, entry in enumerate(entries))
            _check_unique(chips)
        if "hami_vnpu_core" in settings:
            core = hami_config.go_bool("hami_vnpu_core", settings["hami_vnpu_core"])
        return cls(chips=chips, hami_vnpu_core=core)


def _yaml(text: str) -> object:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"vnpus is not valid YAML: {exc}") from None
    # A whole device-config.yaml carries the section under its key.
    if isinstance(document, Mapping) and "vnpus" in document:
        return document["vnpus"]
    return document


def _chip(where: str, entry: object) -> ChipConfig:
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a mapping of chip settings: {entry!r}")
    cw = hami_config.common_word(where, entry)
    where = f"{where} ({cw})"
    allocatable = _int(f"{where}.memoryAllocatable", entry.get("memoryAllocatable"), low=1)
    capacity_raw = entry.get("memoryCapacity")
    templates = entry.get("templates")
    if templates is None:
        templates = []
    if not isinstance(templates, Sequence) or isinstance(templates, str):
        raise ValueError(f"{where}.templates must be a list: {templates!r}")
    return ChipConfig(
        common_word=cw,
        chip_name=_str(f"{where}.chipName", entry.get("chipName"), ""),
        resource_name=_str(f"{where}.resourceName", entry.get("resourceName"), None),
        resource_memory_name=_str(
            f"{where}.resourceMemoryName", entry.get("resourceMemoryName"), None
        ),
        # Before v2.9 chips had no core resource: "" reads none.
        resource_core_name=_str(f"{where}.resourceCoreName", entry.get("resourceCoreName"), ""),
        memory_allocatable=allocatable,
        # Absent: the card's capacity is what it allocates.
        memory_capacity=(
            allocatable
            if capacity_raw is None
            else _int(f"{where}.memoryCapacity", capacity_raw, low=1)
        ),
        # 0 and 1 both mean "no scaling" to HAMi (it multiplies only by a factor > 1).
        memory_factor=max(1, _int(f"{where}.memoryFactor", entry.get("memoryFactor", 1))),
        ai_core=_int(f"{where}.aiCore", entry.get("aiCore", 0)),
        ai_cpu=_int(f"{where}.aiCPU", entry.get("aiCPU", 0)),
        templates=tuple(
            _template(f"{where}.templates[{i}]", item) for i, item in enumerate(templates)
        ),
        super_pod=hami_config.go_bool(f"{where}.superPod", entry.get("superPod", False)),
        runtime_class_name=_str(f"{where}.runtimeClassName", entry.get("runtimeClassName"), ""),
        overwrite_env=hami_config.go_bool(
            f"{where}.overwriteEnv", entry.get("overwriteEnv", False)
        ),
    )


def _template(where: str, item: object) -> Template:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a mapping (name, memory, aiCore, aiCPU): {item!r}")
    return Template(
        name=_str(f"{where}.name", item.get("name"), None),
        memory=_int(f"{where}.memory", item.get("memory"), low=1),
        ai_core=_int(f"{where}.aiCore", item.get("aiCore", 0)),
        ai_cpu=_int(f"{where}.aiCPU", item.get("aiCPU", 0)),
    )


def _int(key: str, value: object, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _INT32_MAX:
        raise ValueError(f"{key} must be an integer in {low}..{_INT32_MAX}: {value!r}")
    return value


def _str(key: str, value: object, default: str | None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or (default is None and not value.strip()):
        raise ValueError(f"{key} must be a non-empty string: {value!r}")
    return value.strip()


def _check_unique(chips: tuple[ChipConfig, ...]) -> None:
    seen: set[str] = set()
    for chip in chips:
        if chip.common_word in seen:
            raise ValueError(f"vnpus: commonWord {chip.common_word!r} appears more than once")
        seen.add(chip.common_word)
