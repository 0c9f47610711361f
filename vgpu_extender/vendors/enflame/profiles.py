"""DRS profiles: the partitions an Enflame GCU can be cut into, named ``<slices>g.<GB>gb``
(``3g.20gb``: 3 of the card's slices, 20 GB), each with the plugin's profile ID.

HAMi's ``Fit`` matches a request to the smallest profile that holds it: a slice count
must equal a profile's size; a memory and core ask takes the first profile (by size) with
at least that memory and core percent. A profile's core percent is
``ceil(size * 100 / max_slice)``, its memory ``GB * 1024`` MiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"([0-9]+)g\.([0-9]+)gb")


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    id: str
    size: int
    memory_gb: int
    core_percent: int

    @property
    def memory_mib(self) -> int:
        return self.memory_gb * 1024


def parse_name(name: str) -> tuple[int, int] | None:
    """``(slices, GB)`` of a profile name, or None when it is not one."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def profiles_of(table: Mapping[str, str]) -> tuple[Profile, ...]:
    """A node's ``profiles`` map (name to ID) as profiles, smallest first; a name that
    is not a profile's is skipped, as HAMi skips it. ``ValueError`` when none is left."""
    parsed = []
    for name, profile_id in table.items():
        shape = parse_name(name)
        if shape is not None and shape[0] > 0 and shape[1] > 0:
            parsed.append((name, str(profile_id), *shape))
    if not parsed:
        raise ValueError(f"no valid drs profiles in {dict(table)!r}")
    max_slice = max(size for _, _, size, _ in parsed)
    return tuple(
        sorted(
            (
                Profile(name, pid, size, gb, math.ceil(size * 100 / max_slice))
                for name, pid, size, gb in parsed
            ),
            key=lambda p: (p.size, p.memory_gb),
        )
    )


def by_slices(profiles: tuple[Profile, ...], slices: int) -> Profile | None:
    return next((p for p in profiles if p.size == slices), None)


def by_spec(profiles: tuple[Profile, ...], memory: int, cores: int) -> Profile | None:
    """The first profile with at least ``memory`` (a value over twice the largest
    profile's GB is MiB, otherwise GB; 0: any) and ``cores`` percent (0: any)."""
    largest = max(p.memory_gb for p in profiles)
    memory_gb = math.ceil(memory / 1024) if memory > 2 * largest else memory
    for profile in profiles:
        if memory_gb > 0 and profile.memory_gb < memory_gb:
            continue
        if cores > 0 and profile.core_percent < cores:
            continue
        return profile
    return None


def by_grant(profiles: tuple[Profile, ...], memory_mib: int, cores: int) -> Profile | None:
    """The profile a grant was charged as (its memory and core percent)."""
    return next(
        (p for p in profiles if p.memory_mib == memory_mib and p.core_percent == cores), None
    )
