"""A Pod read as HAMi's Moore Threads ``GenerateResourceRequests`` reads it.

- the count (limits, else requests) must be 1..int32; none or 0 asks for nothing;
- memory ``sgpu-memory`` is in units of 512 MiB and cores ``sgpu-core`` in sixteenths
  of a GPU, both for the container as a whole: each of its ``n`` GPUs is asked for
  ``memory / n`` and ``cores / n`` (Go's integer division); no memory asks for the
  whole GPU (100 percent), no cores for none;
- ``mthreads.ai/use-gpuuuid`` / ``mthreads.ai/nouse-gpuuuid`` (``.ai``, not ``.com``)
  restrict the GPUs.

A bad quantity raises ``RequestError`` naming the container and the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, quantity_to_int
from vgpu_extender.vendors import hami_pod
from vgpu_extender.vendors.mthreads.config import MEMORY_UNIT_MIB, WORD, MthreadsConfig

USE_UUID_ANNOTATION = "mthreads.ai/use-gpuuuid"
AVOID_UUID_ANNOTATION = "mthreads.ai/nouse-gpuuuid"

_SELECTOR = hami_pod.uuid_selector(USE_UUID_ANNOTATION, AVOID_UUID_ANNOTATION)


def parse_pod(pod: Mapping[str, Any], config: MthreadsConfig) -> PodRequest:
    """Read one pod: one ``ContainerRequest`` per container, init containers first."""
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, config), _SELECTOR)


def read_ask(spec: hami_pod.ContainerSpec, config: MthreadsConfig) -> ContainerRequest:
    name = spec.name
    none = ContainerRequest(name=name, init=spec.init, vendor=WORD)
    count_raw = spec.value(config.count_resource)
    if count_raw is None:
        return none
    count = quantity_to_int(count_raw, field=config.count_resource, container=name)
    if count == 0:
        return none
    memory = 0
    mem_raw = spec.value(config.memory_resource)
    if mem_raw is not None:
        memory = quantity_to_int(mem_raw, field=config.memory_resource, container=name)
        memory *= MEMORY_UNIT_MIB
        if memory > INT32_MAX:
            raise RequestError(
                f"quantity times {MEMORY_UNIT_MIB} MiB must be at most {INT32_MAX} MiB",
                container=name,
                field=config.memory_resource,
                value=mem_raw,
            )
    cores_raw = spec.value(config.cores_resource)
    cores = (
        0
        if cores_raw is None
        else quantity_to_int(cores_raw, field=config.cores_resource, container=name)
    )
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory // count,
        memory_percent=0 if memory else 100,
        cores=cores // count,
        init=spec.init,
        vendor=WORD,
    )
