"""One container's AMD ask, as HAMi's ``GenerateResourceRequests`` reads it: the count
``amd.com/gpu`` (limits, else requests; none or 0 asks for nothing), ``amd.com/gpumem``
in MiB (none: the whole card) and ``amd.com/gpucores`` as a percent 1..100 (none: 100,
the whole card's compute). The percent becomes compute units on each GPU (``share``).

The pod annotations ``amd.com/use-gputype`` / ``nouse-gputype`` and
``amd.com/use-gpu-uuid`` / ``nouse-gpu-uuid`` restrict the GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest, RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.amd.config import AmdConfig

WORD = "AMD"
USE_TYPE = "amd.com/use-gputype"
AVOID_TYPE = "amd.com/nouse-gputype"
USE_UUID = "amd.com/use-gpu-uuid"
AVOID_UUID = "amd.com/nouse-gpu-uuid"
FULL_PERCENT = 100


def read_ask(spec: hami_pod.ContainerSpec, config: AmdConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, config.count_resource)
    if count == 0:
        return hami_ask.none(spec, WORD)
    memory = hami_ask.integer(spec, config.memory_resource)
    cores_raw = spec.value(config.cores_resource)
    cores = FULL_PERCENT
    if cores_raw is not None:
        cores = quantity_to_int(cores_raw, field=config.cores_resource, container=spec.name)
        if not 1 <= cores <= FULL_PERCENT:
            raise RequestError(
                "compute percent must be in 1..100",
                container=spec.name,
                field=config.cores_resource,
                value=cores_raw,
            )
    return hami_ask.share(spec, WORD, count, memory, cores)


read_selector = hami_ask.typed_selector(USE_TYPE, AVOID_TYPE, USE_UUID, AVOID_UUID)


def parse_pod(pod: Mapping[str, Any], config: AmdConfig) -> PodRequest:
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, config), read_selector)
