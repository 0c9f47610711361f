"""What a container needs so HAMi-core enforces its share: environment and mounts.

HAMi-core (``libvgpu.so``, preloaded through ``/etc/ld.so.preload``) reads only
environment variables: the memory limit per visible device, the SM percentage,
and a shared cache file that lives in a per-container host folder. Paths follow
HAMi's device plugin so an existing HAMi-core installation on the host works.
"""

from __future__ import annotations

import os
import uuid as uuid_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vgpu_extender.domain import DeviceGrant

CONTAINER_LOCK_DIR = "/tmp/vgpulock"
PRELOAD_TARGET = "/etc/ld.so.preload"
DISABLE_CONTROL_ENV = "CUDA_DISABLE_CONTROL"


@dataclass(frozen=True, slots=True)
class MountSpec:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """Kubelet's answer for one container, before it becomes a protobuf message."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[MountSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class HamiCoreConfig:
    """``hook_path`` is where HAMi-core is installed on the host (``<hook>/vgpu``)."""

    hook_path: Path = Path("/usr/local")
    lock_dir: Path = Path(CONTAINER_LOCK_DIR)
    memory_scaling: float = 1.0
    disable_core_limit: bool = False
    libcuda_log_level: str = ""

    @property
    def vgpu_dir(self) -> Path:
        return self.hook_path / "vgpu"

    def container_cache_dir(self, pod_uid: str, container: str) -> Path:
        return self.vgpu_dir / "containers" / f"{pod_uid}_{container}"


def container_env(
    grants: Sequence[DeviceGrant], config: HamiCoreConfig, *, cache_id: str | None = None
) -> dict[str, str]:
    """The environment for one container's devices, in kubelet's visible order."""
    if not grants:
        raise ValueError("a container allocation needs at least one device")
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(grant.uuid for grant in grants)}
    for position, grant in enumerate(grants):
        env[f"CUDA_DEVICE_MEMORY_LIMIT_{position}"] = f"{grant.memory_mib}m"
    env["CUDA_DEVICE_SM_LIMIT"] = str(grants[0].cores)
    cache = cache_id or str(uuid_module.uuid4())
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{config.vgpu_dir}/{cache}.cache"
    if config.memory_scaling > 1:
        env["CUDA_OVERSUBSCRIBE"] = "true"
    if config.libcuda_log_level:
        env["LIBCUDA_LOG_LEVEL"] = config.libcuda_log_level
    if config.disable_core_limit:
        env["GPU_CORE_UTILIZATION_POLICY"] = "disable"
    return env


def container_mounts(
    config: HamiCoreConfig,
    *,
    pod_uid: str,
    container: str,
    container_env_vars: Mapping[str, str],
) -> tuple[MountSpec, ...]:
    """Host paths HAMi-core needs inside the container (host → container)."""
    vgpu = config.vgpu_dir
    mounts = [
        MountSpec(str(vgpu / "libvgpu.so"), str(vgpu / "libvgpu.so"), True),
        MountSpec(str(vgpu), str(config.container_cache_dir(pod_uid, container)), False),
        MountSpec(CONTAINER_LOCK_DIR, str(config.lock_dir), False),
    ]
    if container_env_vars.get(DISABLE_CONTROL_ENV, "").lower() != "true":
        mounts.append(MountSpec(PRELOAD_TARGET, str(vgpu / "ld.so.preload"), True))
    if (vgpu / "license").exists():
        mounts.append(MountSpec("/tmp/license", str(vgpu / "license"), True))
        mounts.append(MountSpec("/usr/bin/vgpuvalidator", str(vgpu / "vgpuvalidator"), True))
    return tuple(mounts)


def prepare_host(config: HamiCoreConfig, *, pod_uid: str, container: str) -> None:
    """Create the per-container cache folder (fresh) and the shared lock folder.

    Both are world-writable because the container's user is unknown to us.
    """
    cache_dir = config.container_cache_dir(pod_uid, container)
    if cache_dir.exists():
        for child in cache_dir.iterdir():
            if child.is_file() or child.is_symlink():
                child.unlink()
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_dir, 0o777)
    config.lock_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(config.lock_dir, 0o777)


def build_allocation(
    grants: Sequence[DeviceGrant],
    config: HamiCoreConfig,
    *,
    pod_uid: str,
    container: str,
    container_env_vars: Mapping[str, str],
) -> ContainerAllocation:
    """Prepare the host folders and answer the container's environment and mounts."""
    prepare_host(config, pod_uid=pod_uid, container=container)
    return ContainerAllocation(
        envs=container_env(grants, config),
        mounts=container_mounts(
            config, pod_uid=pod_uid, container=container, container_env_vars=container_env_vars
        ),
    )
