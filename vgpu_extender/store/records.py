"""Plain values the store hands out, so callers never hold ORM rows past a session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from vgpu_extender.domain import PodAssignment


class AllocationState(StrEnum):
    """Life of an allocation row: reserved at bind, bound once Kubernetes accepted the
    binding, released when the pod is gone (or the reservation expired)."""

    RESERVED = "reserved"
    BOUND = "bound"
    RELEASED = "released"


#: States that count against a device's capacity.
LIVE_STATES = (AllocationState.RESERVED.value, AllocationState.BOUND.value)


@dataclass(frozen=True, slots=True)
class Allocation:
    """One container's grant on one device, as stored."""

    pod_uid: str
    namespace: str
    pod_name: str
    node: str
    device_uuid: str
    container_index: int
    init: bool
    memory_mib: int
    cores: int
    state: AllocationState
    created_at: datetime
    updated_at: datetime
    bound_at: datetime | None
    released_at: datetime | None


@dataclass(frozen=True, slots=True)
class PodMeta:
    """Who holds an assignment and how far its bind got.

    ``state`` is ``bound`` only when every row of the pod is bound.
    """

    uid: str
    namespace: str
    name: str
    node: str
    state: AllocationState
    created_at: datetime
    bound_at: datetime | None


class StoredPod(NamedTuple):
    """A live pod's assignment together with its metadata (unpacks as a pair)."""

    assignment: PodAssignment
    meta: PodMeta
