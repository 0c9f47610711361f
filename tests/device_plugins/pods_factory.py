"""Pods as the extender's bind leaves them, written into the test API server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from device_plugins.discovery.base import PhysicalDevice
from device_plugins.nodelock import LOCK_ANNOTATION
from tests.device_plugins.conftest import NODE
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.vendors.nvidia.allocation_codec import bind_annotations
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

CONFIG = NvidiaConfig()
GPU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
V100 = "Tesla V100-PCIE-32GB"
DEVICES = (
    PhysicalDevice(GPU0, 0, V100, 32768, numa=0),
    PhysicalDevice(GPU1, 1, V100, 32768, numa=1),
)
TO_ALLOCATE = CONFIG.to_allocate_annotation
PHASE = CONFIG.bind_phase_annotation


def bound_pod(
    api: FakeApiServer,
    name: str,
    containers: Sequence[Sequence[DeviceGrant]],
    *,
    bind_time: int = 1_700_000_000,
    init: Sequence[bool] = (),
    lock: bool = True,
    node: str = NODE,
    overrides: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Pending pod on ``node`` with the extender's bind annotations (and node lock)."""
    flags = tuple(init) or (False,) * len(containers)
    assignment = PodAssignment(node=node, containers=tuple(map(tuple, containers)), init=flags)
    annotations = bind_annotations(assignment, bind_time=bind_time, config=CONFIG)
    annotations.update(overrides or {})
    specs = [
        {
            "name": f"c{i}",
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        }
        for i in range(len(containers))
    ]
    pod = api.add_pod(
        {
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
            "spec": {
                "nodeName": node,
                "initContainers": [s for s, f in zip(specs, flags, strict=True) if f],
                "containers": [s for s, f in zip(specs, flags, strict=True) if not f],
            },
            "status": {"phase": "Pending"},
        }
    )
    if lock:
        set_lock(api, f"2026-08-01T06:00:00Z,ml,{name}", node=node)
    return pod


def set_lock(api: FakeApiServer, value: str | None, *, node: str = NODE) -> None:
    api.cluster.patch("nodes", "", node, {"metadata": {"annotations": {LOCK_ANNOTATION: value}}})


def lock_of(api: FakeApiServer, node: str = NODE) -> str | None:
    annotations = api.get_node(node)["metadata"].get("annotations") or {}
    value = annotations.get(LOCK_ANNOTATION)
    return value if isinstance(value, str) else None


def annotations_of(api: FakeApiServer, name: str) -> dict[str, str]:
    return dict(api.get_pod("ml", name)["metadata"]["annotations"])
