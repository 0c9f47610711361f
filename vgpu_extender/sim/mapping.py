"""The trace in our terms: GPUs as devices, pods as requests (and as Kubernetes Pods).

The trace counts GPU in thousandths (milli). Here a GPU is a device with 100 cores and a
nominal memory; a sharing pod takes its milli as that share of one GPU's cores and memory
(``gpu_milli / 10`` per cent: every share in the trace is a multiple of 10 milli), and a
whole or multi-GPU pod takes whole devices (100 cores: exclusive). The trace gives no GPU
memory; 16,000 MiB makes one per cent exactly 160 MiB, so memory and cores move in step
with the trace's milli. A device may hold up to 100 pods, so only cores and memory limit
sharing, as in the trace.

GPU models are device types; a pod's allowed models become its type selector. Type
selectors match substrings, which is exact here: no model name of the trace contains
another.
"""

from __future__ import annotations

from typing import Any

from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceSelector,
    NodeInventory,
    PodRequest,
)
from vgpu_extender.policies.typical_pods import TypicalPod
from vgpu_extender.sim.trace import GPU_MILLI, TraceNode, TracePod

GPU_MEMORY_MIB = 16_000
SPLIT_COUNT = 100
#: Resource and annotation names a Pod carries (HAMi's, as the NVIDIA vendor reads them).
GPU_RESOURCE = "nvidia.com/gpu"
CORES_RESOURCE = "nvidia.com/gpucores"
MEMORY_PERCENT_RESOURCE = "nvidia.com/gpumem-percentage"
USE_TYPE_ANNOTATION = "nvidia.com/use-gputype"


def device_uuid(node: str, index: int) -> str:
    return f"GPU-{node}-{index}"


def node_inventory(node: TraceNode) -> NodeInventory:
    devices = tuple(
        Device(
            uuid=device_uuid(node.name, i),
            index=i,
            count=SPLIT_COUNT,
            memory_mib=GPU_MEMORY_MIB,
            cores=100,
            type=node.model,
        )
        for i in range(node.gpus)
    )
    return NodeInventory(
        name=node.name,
        devices=devices,
        labels={"gpu-model": node.model},
        cpu_milli=node.cpu_milli,
        memory_mib=node.memory_mib,
    )


def percent(pod: TracePod) -> int:
    """Per-GPU share in per cent of cores and memory."""
    return pod.gpu_milli * 100 // GPU_MILLI


def pod_request(pod: TracePod, uid: str) -> PodRequest:
    if pod.wants_gpu:
        share = percent(pod)
        container = ContainerRequest(
            name="main", count=pod.num_gpu, memory_percent=share, cores=share
        )
    else:
        container = ContainerRequest(name="main")
    return PodRequest(
        uid=uid,
        name=pod.name,
        containers=(container,),
        selector=DeviceSelector(use_types=tuple(dict.fromkeys(m.lower() for m in pod.models))),
        cpu_milli=pod.cpu_milli,
        host_memory_mib=pod.memory_mib,
    )


def typical_pod(pod: TracePod) -> TypicalPod:
    """The pod's shape for FGD's typical pods (memory is not part of a shape)."""
    return TypicalPod.from_milli(
        cpu_milli=pod.cpu_milli,
        gpu_milli=pod.gpu_milli if pod.wants_gpu else 0,
        count=pod.num_gpu if pod.wants_gpu else 0,
        types=pod.models,
    )


def pod_manifest(pod: TracePod, uid: str, *, namespace: str = "default") -> dict[str, Any]:
    """The Pod as kube-scheduler would send it to an extender (abridged)."""
    requests: dict[str, str] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if pod.wants_gpu:
        share = percent(pod)
        limits[GPU_RESOURCE] = str(pod.num_gpu)
        limits[CORES_RESOURCE] = str(share)
        limits[MEMORY_PERCENT_RESOURCE] = str(share)
    metadata: dict[str, Any] = {"name": pod.name, "namespace": namespace, "uid": uid}
    if pod.models:
        metadata["annotations"] = {USE_TYPE_ANNOTATION: ",".join(pod.models)}
    return {
        "metadata": metadata,
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": requests, "limits": limits}}],
            "schedulerName": "default-scheduler",
            "priority": 0,
        },
        "status": {"phase": "Pending"},
    }
