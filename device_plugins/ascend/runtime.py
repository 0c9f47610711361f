"""What one container gets from the Ascend plugin: the chips it sees, and its vNPU.

Always ``ASCEND_VISIBLE_DEVICES=<physical IDs>``. A hard-split vNPU adds
``ASCEND_VNPU_SPECS=<template>`` (the first of the container's chips with a template in
``huawei.com/<CW>``; a whole card has none), which Ascend's container runtime turns
into the vNPU. A HAMi-core pod (``huawei.com/vnpu-mode: hami-core``) gets the limiter's
environment (memory quota and priority of its first chip) and mounts: the driver tools
read-only, ``hami-vnpu-core`` preloaded, the node's shared region and a per-container
folder under ``<hook path>/containers``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from device_plugins.ascend.chips import NpuChip
from device_plugins.hami_core import ContainerAllocation, MountSpec
from vgpu_extender.domain import DeviceGrant

VISIBLE_DEVICES_ENV = "ASCEND_VISIBLE_DEVICES"
VNPU_SPECS_ENV = "ASCEND_VNPU_SPECS"
MEM_QUOTA_ENV = "NPU_MEM_QUOTA"
PRIORITY_ENV = "NPU_PRIORITY"
GLOBAL_SHM_ENV = "NPU_GLOBAL_SHM_PATH"
LOCAL_SHM_ENV = "NPU_LOCAL_SHM_PATH"
SHARED_REGION_MOUNT = "/hami-shared-region"
LOCAL_SHM_MOUNT = "/hami-vnpu-shmem"
CORE_MOUNT = "/hami-vnpu-core"
PRELOAD_TARGET = "/etc/ld.so.preload"
#: The driver files the limiter reads, mounted at the same place, read-only.
DRIVER_FILES = (
    "/usr/local/bin/npu-smi",
    "/etc/ascend_install.info",
    "/usr/local/Ascend/driver/lib64/driver",
    "/usr/local/Ascend/driver/version.info",
)


class RuntimeInfoError(ValueError):
    """``huawei.com/<CW>`` is not the scheduler's JSON list."""


@dataclass(frozen=True, slots=True)
class RuntimeEntry:
    """One chip's entry of ``huawei.com/<CW>``; None where the scheduler left it out."""

    temp: str | None = None
    memory: int | None = None
    core: int | None = None


@dataclass(frozen=True, slots=True)
class CorePaths:
    """Where HAMi-core for NPUs lives on the host."""

    hook_path: Path = Path("/usr/local")
    core_dir: Path = Path("/usr/local/hami-vnpu-core")
    shared_region: Path = Path("/usr/local/hami-shared-region")

    def container_dir(self, pod_uid: str, container: str) -> Path:
        return self.hook_path / "containers" / f"{pod_uid}_{container}"


def parse_runtime_info(value: str) -> dict[str, RuntimeEntry]:
    """Entries by UUID (the first of a UUID listed twice); keys matched as Go does, any case."""
    return {uuid: entries[0] for uuid, entries in parse_runtime_entries(value).items()}


def runtime_for(
    grants: Sequence[DeviceGrant], entries: Mapping[str, Sequence[RuntimeEntry]]
) -> dict[str, RuntimeEntry]:
    """The entry of each of one container's grants. Two containers of a pod on one NPU
    list it twice, one entry each in container order: a grant takes the entry of its own
    memory, else the first."""
    chosen: dict[str, RuntimeEntry] = {}
    for grant in grants:
        listed = entries.get(grant.uuid, ())
        own = [entry for entry in listed if entry.memory == grant.memory_mib]
        if own or listed:
            chosen[grant.uuid] = (own or list(listed))[0]
    return chosen


def parse_runtime_entries(value: str) -> dict[str, list[RuntimeEntry]]:
    """Every entry by UUID, in the list's order; keys matched as Go does, any case."""
    try:
        items = json.loads(value)
    except ValueError as exc:
        raise RuntimeInfoError(f"not JSON ({exc})") from None
    if items is None:
        return {}
    if not isinstance(items, list):
        raise RuntimeInfoError("not a JSON list")
    entries: dict[str, list[RuntimeEntry]] = {}
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise RuntimeInfoError(f"entry #{position} is not an object")
        fields = {str(key).lower(): field for key, field in item.items()}
        uuid = fields.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise RuntimeInfoError(f"entry #{position} has no UUID")
        temp = fields.get("temp")
        if temp is not None and not isinstance(temp, str):
            raise RuntimeInfoError(f"entry #{position}: temp {temp!r} is not a string")
        entries.setdefault(uuid, []).append(
            RuntimeEntry(
                temp=temp or None,
                memory=_number(position, "memory", fields.get("memory")),
                core=_number(position, "core", fields.get("core")),
            )
        )
    return entries


def _number(position: int, key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuntimeInfoError(f"entry #{position}: {key} {value!r} is not a whole number")
    return value


def hard_split_env(
    grants: Sequence[DeviceGrant], runtime: Mapping[str, RuntimeEntry]
) -> dict[str, str]:
    for grant in grants:
        entry = runtime.get(grant.uuid)
        if entry is not None and entry.temp:
            return {VNPU_SPECS_ENV: entry.temp}
    return {}


def hami_core_env(
    grants: Sequence[DeviceGrant], runtime: Mapping[str, RuntimeEntry], first_physical: int
) -> dict[str, str]:
    env: dict[str, str] = {}
    first = runtime.get(grants[0].uuid)
    if first is not None and first.memory is not None:
        env[MEM_QUOTA_ENV] = str(first.memory)
    if first is not None and first.core is not None:
        env[PRIORITY_ENV] = str(first.core)
    env[GLOBAL_SHM_ENV] = f"{SHARED_REGION_MOUNT}/{first_physical}_global_registry"
    env[LOCAL_SHM_ENV] = f"{LOCAL_SHM_MOUNT}/vnpu_local_shmem"
    return env


def hami_core_mounts(paths: CorePaths, *, pod_uid: str, container: str) -> tuple[MountSpec, ...]:
    mounts = [MountSpec(path, path, True) for path in DRIVER_FILES]
    mounts += [
        MountSpec(CORE_MOUNT, str(paths.core_dir), True),
        MountSpec(PRELOAD_TARGET, str(paths.core_dir / "ld.so.preload"), True),
        MountSpec(SHARED_REGION_MOUNT, str(paths.shared_region), False),
        MountSpec(LOCAL_SHM_MOUNT, str(paths.container_dir(pod_uid, container)), False),
    ]
    return tuple(mounts)


def prepare_container_dir(paths: CorePaths, *, pod_uid: str, container: str) -> None:
    """The container's own shared-memory folder, world-writable: its user is unknown."""
    folder = paths.container_dir(pod_uid, container)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o777)


def container_answer(
    grants: Sequence[DeviceGrant],
    chips: Mapping[str, NpuChip],
    runtime: Mapping[str, RuntimeEntry],
    *,
    hami_core: bool,
    paths: CorePaths,
    pod_uid: str,
    container: str,
) -> ContainerAllocation:
    """The container's environment and mounts; ``chips`` must hold every grant's chip."""
    if not grants:
        raise ValueError("a container allocation needs at least one chip")
    physical = [chips[grant.uuid].physical_id for grant in grants]
    env = {VISIBLE_DEVICES_ENV: ",".join(str(number) for number in physical)}
    if not hami_core:
        env.update(hard_split_env(grants, runtime))
        return ContainerAllocation(envs=env)
    env.update(hami_core_env(grants, runtime, physical[0]))
    prepare_container_dir(paths, pod_uid=pod_uid, container=container)
    return ContainerAllocation(
        envs=env, mounts=hami_core_mounts(paths, pod_uid=pod_uid, container=container)
    )
