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

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.mthreads.config import MEMORY_UNIT_MIB, WORD, MthreadsConfig

USE_UUID_ANNOTATION = "mthreads.ai/use-gpuuuid"
AVOID_UUID_ANNOTATION = "mthreads.ai/nouse-gpuuuid"

_SELECTOR = hami_pod.uuid_selector(USE_UUID_ANNOTATION, AVOID_UUID_ANNOTATION)


def parse_pod(pod: Mapping[str, Any], config: MthreadsConfig) -> PodRequest:
    """Read one pod: one ``ContainerRequest`` per container, init containers first."""
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, config), _SELECTOR)


def read_ask(spec: hami_pod.ContainerSpec, config: MthreadsConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, config.count_resource)
    if count == 0:
        return hami_ask.none(spec, WORD)
    memory = hami_ask.scaled_memory(spec, config.memory_resource, MEMORY_UNIT_MIB)
    cores = hami_ask.integer(spec, config.cores_resource)
    # Asked for the container as a whole: each GPU takes its part (Go's division); the
    # whole memory only when none was asked, even where a part rounds down to 0.
    return ContainerRequest(
        name=spec.name,
        count=count,
        memory_mib=memory // count,
        memory_percent=0 if memory else hami_ask.FULL_PERCENT,
        cores=cores // count,
        init=spec.init,
        vendor=WORD,
    )
