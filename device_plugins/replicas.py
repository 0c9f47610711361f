"""Kubelet sees each physical GPU as ``split`` replica devices ``<UUID>-<i>``.

Extended resources are integers and cannot be shared between containers, so a GPU
that holds ten allocations is advertised as ten devices. The replica number means
nothing beyond counting; the pod's annotation says which GPU a container gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from device_plugins.settings import MAX_DEVICE_ID


class ReplicaIdError(ValueError):
    """A device ID from kubelet is not one of ours."""


def replica_ids(uuid: str, split: int) -> list[str]:
    ids = [f"{uuid}-{i}" for i in range(split)]
    if len(ids[-1]) > MAX_DEVICE_ID:
        raise ReplicaIdError(
            f"device id {ids[-1]!r} is longer than kubelet's {MAX_DEVICE_ID} characters"
        )
    return ids


def physical_uuid(replica_id: str) -> str:
    """``GPU-abc-3`` → ``GPU-abc``; raises on an ID without a replica suffix."""
    uuid, dash, number = replica_id.rpartition("-")
    if not dash or not uuid or not number.isdigit():
        raise ReplicaIdError(f"device id {replica_id!r} is not of the form <UUID>-<number>")
    return uuid


def preferred_replicas(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    *,
    wanted_uuids: Iterable[str] = (),
) -> list[str]:
    """Choose ``size`` replica IDs for kubelet's ``GetPreferredAllocation``.

    Keeps ``must_include``, then takes one replica of each GPU in ``wanted_uuids``
    (the GPUs the scheduler wrote for the pod being admitted), then replicas of GPUs
    not chosen yet (a container's count is a number of distinct GPUs), then any.
    """
    chosen: list[str] = list(dict.fromkeys(must_include))
    used = {_safe_uuid(rid) for rid in chosen}

    def take(candidates: Iterable[str]) -> None:
        for rid in candidates:
            if len(chosen) >= size:
                return
            uuid = _safe_uuid(rid)
            if rid in chosen or uuid in used:
                continue
            chosen.append(rid)
            used.add(uuid)

    for uuid in wanted_uuids:
        take(rid for rid in available if _safe_uuid(rid) == uuid)
    take(available)
    for rid in available:
        if len(chosen) >= size:
            break
        if rid not in chosen:
            chosen.append(rid)
    return chosen


def _safe_uuid(replica_id: str) -> str:
    try:
        return physical_uuid(replica_id)
    except ReplicaIdError:
        return replica_id
