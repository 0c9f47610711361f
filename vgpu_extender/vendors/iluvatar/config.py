"""The Iluvatar vendor's settings: HAMi's ``iluvatars:`` section of
``device-config.yaml``, a **list** of chips ``{chipName, commonWord,
resourceCountName, resourceMemoryName, resourceCoreName}``. Without it, HAMi's four
chips MR-V100, MR-V50, BI-V150 and BI-V100 with ``iluvatar.ai/<CW>-vgpu``,
``iluvatar.ai/<CW>.vMem`` and ``iluvatar.ai/<CW>.vCore``.

Unknown keys in a chip entry are ignored, as Go's YAML decoder ignores them; a bad value
raises ``ValueError`` naming the entry, the key and the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

#: One memory unit of ``.vMem``, in MiB.
MEMORY_UNIT_MIB = 256


@dataclass(frozen=True, slots=True)
class IluvatarChip:
    common_word: str
    chip_name: str
    count_resource: str
    memory_resource: str
    cores_resource: str

    @classmethod
    def default(cls, common_word: str) -> IluvatarChip:
        return cls(
            common_word=common_word,
            chip_name=common_word,
            count_resource=f"iluvatar.ai/{common_word}-vgpu",
            memory_resource=f"iluvatar.ai/{common_word}.vMem",
            cores_resource=f"iluvatar.ai/{common_word}.vCore",
        )

    @property
    def resources(self) -> frozenset[str]:
        return frozenset((self.count_resource, self.memory_resource, self.cores_resource))


DEFAULT_CHIPS = tuple(
    IluvatarChip.default(cw) for cw in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
)


@dataclass(frozen=True, slots=True)
class IluvatarConfig:
    chips: tuple[IluvatarChip, ...] = DEFAULT_CHIPS

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> IluvatarConfig:
        """From ``{"iluvatars": [<chip>, ...]}``; ``ValueError`` for a bad one."""
        section = hami_config.section(settings, "Iluvatar", frozenset({"iluvatars"}))
        entries = section.get("iluvatars")
        if entries is None:
            return cls()
        if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
            raise ValueError(f"iluvatars must be a non-empty list of chip entries: {entries!r}")
        chips = tuple(_chip(f"iluvatars[{i}]", entry) for i, entry in enumerate(entries))
        words = [chip.common_word for chip in chips]
        for word in words:
            if words.count(word) > 1:
                raise ValueError(f"iluvatars: commonWord {word!r} appears more than once")
        return cls(chips=chips)


def _chip(where: str, entry: object) -> IluvatarChip:
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a mapping of chip settings: {entry!r}")
    cw = hami_config.common_word(where, entry)
    default = IluvatarChip.default(cw)
    chip_name = entry.get("chipName", cw)
    if not isinstance(chip_name, str):
        raise ValueError(f"{where}.chipName must be a string: {chip_name!r}")
    return IluvatarChip(
        common_word=cw,
        chip_name=chip_name,
        count_resource=hami_config.name(entry, "resourceCountName", default.count_resource),
        memory_resource=hami_config.name(entry, "resourceMemoryName", default.memory_resource),
        cores_resource=hami_config.name(entry, "resourceCoreName", default.cores_resource),
    )
