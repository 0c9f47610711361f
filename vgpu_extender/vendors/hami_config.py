"""Reading a HAMi vendor's config section (``device-config.yaml``'s ``amd:``,
``kunlun:``...): HAMi's camelCase keys, each a resource name with HAMi's default.
A bad value or an unknown key raises ``ValueError`` naming the key and the value, so a
bad ConfigMap fails at start-up rather than on the first pod."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from vgpu_extender.vendors import gostrconv

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Config = TypeVar("_Config", bound="DataclassInstance")
#: A CW is spliced into annotation keys (``hami.io/<CW>-devices-allocated``) and into the
#: pod annotation's ``uuid,<CW>,mem,cores`` entries: a key-safe name only.
_COMMON_WORD = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")


#: The three resources most vendors' sections rename (field: HAMi key).
COUNT_MEMORY_CORES = MappingProxyType(
    {
        "count_resource": "resourceCountName",
        "memory_resource": "resourceMemoryName",
        "cores_resource": "resourceCoreName",
    }
)


def section(settings: object, vendor: str, known: frozenset[str]) -> Mapping[str, Any]:
    """``settings`` checked to be a mapping of ``known`` keys only."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"{vendor} settings must be a mapping: {settings!r}")
    unknown = sorted(str(key) for key in settings if key not in known)
    if unknown:
        raise ValueError(
            f"unknown {vendor} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return settings


def name(settings: Mapping[str, Any], key: str, default: str) -> str:
    """A resource name (non-empty, no spaces); ``default`` when absent."""
    value = settings.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ValueError(f"{key} must be a resource name without spaces: {value!r}")
    return value.strip()


def with_names(defaults: _Config, settings: Mapping[str, Any], keys: Mapping[str, str]) -> _Config:
    """``defaults`` (a dataclass) with each field of ``keys`` (field: HAMi key) read as a
    resource name, its default the field's; keys are read in order, the first bad one
    is the error."""
    names = {field: name(settings, key, getattr(defaults, field)) for field, key in keys.items()}
    return replace(defaults, **names)


def common_word(where: str, entry: Mapping[str, Any]) -> str:
    """A chip entry's ``commonWord`` (the vendor word of its devices)."""
    cw = entry.get("commonWord")
    if not isinstance(cw, str) or _COMMON_WORD.fullmatch(cw) is None:
        raise ValueError(
            f"{where}.commonWord must be a name of letters, digits, '.', '_' or '-': {cw!r}"
        )
    return cw


def flag(settings: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean: YAML's, or a string Go's ``strconv.ParseBool`` reads."""
    value = settings.get(key)
    if value is None:
        return default
    return go_bool(key, value)


def go_bool(key: str, value: object) -> bool:
    """``value`` as a boolean: YAML's, or a string Go's ``strconv.ParseBool`` reads;
    ``ValueError`` naming ``key`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return gostrconv.parse_bool(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{key} must be true or false: {value!r}")
