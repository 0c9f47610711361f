"""HAMi-core's environment and mounts for one container, and the host folders."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from device_plugins.hami_core import (
    HamiCoreConfig,
    MountSpec,
    build_allocation,
    container_env,
    container_mounts,
)
from vgpu_extender.domain import DeviceGrant

GPU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"


@pytest.mark.parametrize(
    ("grants", "config", "expected"),
    [
        pytest.param(
            [DeviceGrant(GPU0, 3000, 30)],
            HamiCoreConfig(hook_path=Path("/hook")),
            {
                "NVIDIA_VISIBLE_DEVICES": GPU0,
                "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
                "CUDA_DEVICE_SM_LIMIT": "30",
                "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/hook/vgpu/c.cache",
            },
            id="one-gpu",
        ),
        pytest.param(
            [DeviceGrant(GPU1, 1000, 10), DeviceGrant(GPU0, 3000, 30)],
            HamiCoreConfig(
                hook_path=Path("/usr/local"),
                memory_scaling=1.5,
                libcuda_log_level="4",
                disable_core_limit=True,
            ),
            {
                "NVIDIA_VISIBLE_DEVICES": f"{GPU1},{GPU0}",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "1000m",
                "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m",
                "CUDA_DEVICE_SM_LIMIT": "10",
                "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/usr/local/vgpu/c.cache",
                "CUDA_OVERSUBSCRIBE": "true",
                "LIBCUDA_LOG_LEVEL": "4",
                "GPU_CORE_UTILIZATION_POLICY": "disable",
            },
            id="two-gpus-oversubscribed-options",
        ),
    ],
)
def test_container_env(
    grants: list[DeviceGrant], config: HamiCoreConfig, expected: dict[str, str]
) -> None:
    assert container_env(grants, config, cache_id="c") == expected


def test_env_needs_a_device() -> None:
    with pytest.raises(ValueError, match="at least one device"):
        container_env([], HamiCoreConfig())


def test_shared_cache_is_unique_per_call() -> None:
    config = HamiCoreConfig()
    grants = [DeviceGrant(GPU0, 1, 1)]
    first = container_env(grants, config)["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    assert first != container_env(grants, config)["CUDA_DEVICE_MEMORY_SHARED_CACHE"]


@pytest.mark.parametrize(
    ("env", "license_file", "targets"),
    [
        pytest.param(
            {},
            False,
            ["/h/vgpu/libvgpu.so", "/h/vgpu", "/tmp/vgpulock", "/etc/ld.so.preload"],
            id="default",
        ),
        pytest.param(
            {"CUDA_DISABLE_CONTROL": "true"},
            False,
            ["/h/vgpu/libvgpu.so", "/h/vgpu", "/tmp/vgpulock"],
            id="control-disabled-no-preload",
        ),
        pytest.param(
            {},
            True,
            [
                "/h/vgpu/libvgpu.so",
                "/h/vgpu",
                "/tmp/vgpulock",
                "/etc/ld.so.preload",
                "/tmp/license",
                "/usr/bin/vgpuvalidator",
            ],
            id="licensed",
        ),
    ],
)
def test_container_mounts(
    tmp_path: Path, env: dict[str, str], license_file: bool, targets: list[str]
) -> None:
    hook = tmp_path / "h"
    (hook / "vgpu").mkdir(parents=True)
    if license_file:
        (hook / "vgpu" / "license").write_text("x")
    config = HamiCoreConfig(hook_path=hook, lock_dir=tmp_path / "lock")
    mounts = container_mounts(config, pod_uid="uid-1", container="main", container_env_vars=env)
    assert [m.container_path.replace(str(tmp_path), "") for m in mounts] == targets
    assert mounts[1] == MountSpec(
        str(hook / "vgpu"), str(hook / "vgpu" / "containers" / "uid-1_main"), False
    )
    assert mounts[2] == MountSpec("/tmp/vgpulock", str(tmp_path / "lock"), False)
    assert mounts[0].read_only


def test_build_allocation_prepares_fresh_world_writable_folders(tmp_path: Path) -> None:
    config = HamiCoreConfig(hook_path=tmp_path / "h", lock_dir=tmp_path / "lock")
    cache = config.container_cache_dir("uid-1", "main")
    cache.mkdir(parents=True)
    (cache / "old.cache").write_text("stale")
    allocation = build_allocation(
        [DeviceGrant(GPU0, 3000, 30)],
        config,
        pod_uid="uid-1",
        container="main",
        container_env_vars={},
    )
    assert allocation.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert list(cache.iterdir()) == []
    for folder in (cache, tmp_path / "lock"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777
