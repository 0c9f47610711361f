"""Enflame pod annotations. Neither backend takes a node lock.

- ``GCU``: HAMi's device encoding under ``hami.io/enflame-gcu-devices-to-allocate`` and
  ``-allocated``.
- ``Enflame`` (DRS): **only** ``hami.io/enflame-vgpu-devices-allocated`` (no
  to-allocate key), and for the plugin ``enflame.com/gcu-assigned: "false"``,
  ``enflame.com/gcu-assigned-time`` (Unix nanoseconds), from the first container given
  a GCU ``enflame.com/gcu-assigned-index`` and ``-id`` (its index),
  ``enflame.com/gcu-assigned-minor`` and ``enflame.com/gcu-request-size`` (its
  profile's slices), and ``assigned-containers``: per container given a GCU,
  ``{"allocated":false,"request":<slices>,"profileID":…,"profileName":…}``, keys sorted
  as Go writes a map.

A grant carries its GCU's ID (``<node>-enflame-drs-<index>``) and the profile's memory
and cores, not the GCU's minor: the minor is written as the index, as the plugin
registers a GCU whose minor it does not know.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant, PodRequest
from vgpu_extender.vendors.enflame.profiles import Profile, by_grant
from vgpu_extender.vendors.hami_devices import go_json_string

GCU_TO_ALLOCATE = "hami.io/enflame-gcu-devices-to-allocate"
GCU_ALLOCATED = "hami.io/enflame-gcu-devices-allocated"
DRS_ALLOCATED = "hami.io/enflame-vgpu-devices-allocated"
NODE_LOCK: str | None = None
ASSIGNED = "enflame.com/gcu-assigned"
ASSIGNED_TIME = "enflame.com/gcu-assigned-time"
ASSIGNED_INDEX = "enflame.com/gcu-assigned-index"
ASSIGNED_ID = "enflame.com/gcu-assigned-id"
ASSIGNED_MINOR = "enflame.com/gcu-assigned-minor"
REQUEST_SIZE = "enflame.com/gcu-request-size"
ASSIGNED_CONTAINERS = "assigned-containers"
_DRS_ID = "-enflame-drs-"


def drs_annotations(
    containers: Sequence[Sequence[DeviceGrant]],
    *,
    bind_time: int,
    request: PodRequest | None,
    profiles: tuple[Profile, ...],
) -> dict[str, str]:
    annotations = {ASSIGNED: "false", ASSIGNED_TIME: str(bind_time * 1_000_000_000)}
    assigned: dict[str, str] = {}
    for position, grants in enumerate(containers):
        if not grants:
            continue
        chosen = grants[0]
        profile = by_grant(profiles, chosen.memory_mib, chosen.cores)
        if profile is None:
            raise AnnotationError(
                "grant matches no DRS profile (memory and core percent)", value=chosen
            )
        name = _container_name(request, position)
        assigned[name] = (
            f'{{"allocated":false,"request":{profile.size},'
            f'"profileID":{go_json_string(profile.id)},'
            f'"profileName":{go_json_string(profile.name)}}}'
        )
        if ASSIGNED_INDEX not in annotations:
            index = _index_of(chosen.uuid)
            annotations[ASSIGNED_INDEX] = annotations[ASSIGNED_ID] = index
            annotations[ASSIGNED_MINOR] = index
            annotations[REQUEST_SIZE] = str(profile.size)
    if assigned:
        annotations[ASSIGNED_CONTAINERS] = (
            "{" + ",".join(f"{go_json_string(k)}:{assigned[k]}" for k in sorted(assigned)) + "}"
        )
    return annotations


def _container_name(request: PodRequest | None, position: int) -> str:
    if request is not None and position < len(request.containers):
        return request.containers[position].name
    return str(position)


def _index_of(uuid: str) -> str:
    _, found, index = uuid.rpartition(_DRS_ID)
    if not found or not index.isdigit():
        raise AnnotationError("DRS GCU id must end in -enflame-drs-<index>", value=uuid)
    return index
