"""The Enflame vendors' settings: HAMi's ``enflame:`` config section, and the DRS profile
table requests are matched to.

HAMi reads each node's profiles from its ``enflame.com/gcu-drs-capacity`` annotation and
matches a request at Fit; here a request is matched when it is read, against
``drsProfiles`` (name to profile ID; default: the plugin's ``1g.6gb``, ``3g.20gb``,
``6g.40gb``), so a cluster whose GCUs cut other profiles sets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu_extender.vendors import hami_config
from vgpu_extender.vendors.enflame.profiles import Profile, profiles_of

_KEYS = frozenset(
    {
        "resourceNameGCU",
        "resourceNameDRSGCU",
        "resourceNameGCUMemory",
        "resourceNameGCUCore",
        "resourceNameVGCU",
        "resourceNameVGCUPercentage",
        "drsProfiles",
    }
)
DEFAULT_PROFILES = profiles_of({"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"})


@dataclass(frozen=True, slots=True)
class EnflameConfig:
    gcu_resource: str = "enflame.com/gcu"
    drs_resource: str = "enflame.com/drs-gcu"
    memory_resource: str = "enflame.com/gcu-memory"
    core_resource: str = "enflame.com/gcu-core"
    profiles: tuple[Profile, ...] = field(default=DEFAULT_PROFILES)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> EnflameConfig:
        section = hami_config.section(settings, "Enflame", _KEYS)
        d = cls()
        # HAMi: the DRS name, else the legacy vGCU name, else the default.
        legacy = hami_config.name(section, "resourceNameVGCU", d.drs_resource)
        hami_config.name(section, "resourceNameVGCUPercentage", "unused")
        return cls(
            gcu_resource=hami_config.name(section, "resourceNameGCU", d.gcu_resource),
            drs_resource=hami_config.name(section, "resourceNameDRSGCU", legacy),
            memory_resource=hami_config.name(section, "resourceNameGCUMemory", d.memory_resource),
            core_resource=hami_config.name(section, "resourceNameGCUCore", d.core_resource),
            profiles=_profiles(section.get("drsProfiles")),
        )


def _profiles(raw: object) -> tuple[Profile, ...]:
    if raw is None:
        return DEFAULT_PROFILES
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
        for k, v in raw.items()
    ):
        raise ValueError(f"drsProfiles must map profile names to IDs: {raw!r}")
    try:
        return profiles_of({k: str(v) for k, v in raw.items()})
    except ValueError as exc:
        raise ValueError(f"drsProfiles: {exc}") from None
