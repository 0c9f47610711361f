"""A Pod read as HAMi's Cambricon ``GenerateResourceRequests`` reads it.

- the count comes from limits, else requests; none (or 0) asks for no MLU;
- memory (limits, else requests) is in units of 256 MiB, and must be a whole number
  whose MiB fit an int32 (``16Gi`` does not); none asks for the whole MLU (100 percent);
- cores are percent and default to 100, so a bare count asks for whole MLUs;
- ``cambricon.com/use-gpuuuid`` / ``nouse-gpuuuid`` restrict the MLUs. HAMi defines
  ``cambricon.com/use-mlutype`` / ``nouse-mlutype`` but never enforces them (every MLU
  is typed ``MLU``, #2774), so they are not read.

Where HAMi reads a bad quantity as "no request", this raises ``RequestError`` naming the
container and the resource, as the other vendors do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.cambricon.config import MEMORY_UNIT_MIB, WORD, CambriconConfig

USE_UUID_ANNOTATION = "cambricon.com/use-gpuuuid"
AVOID_UUID_ANNOTATION = "cambricon.com/nouse-gpuuuid"
#: Defined by HAMi, not enforced by its Fit (#2774).
USE_TYPE_ANNOTATION = "cambricon.com/use-mlutype"
AVOID_TYPE_ANNOTATION = "cambricon.com/nouse-mlutype"
DEFAULT_CORES = 100

_SELECTOR = hami_pod.uuid_selector(USE_UUID_ANNOTATION, AVOID_UUID_ANNOTATION)


def parse_pod(pod: Mapping[str, Any], config: CambriconConfig) -> PodRequest:
    """Read one pod: one ``ContainerRequest`` per container, init containers first."""
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, config), _SELECTOR)


def read_ask(spec: hami_pod.ContainerSpec, config: CambriconConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, config.count_resource)
    if count == 0:
        return hami_ask.none(spec, WORD)
    memory = hami_ask.scaled_memory(spec, config.memory_resource, MEMORY_UNIT_MIB)
    cores = hami_ask.integer(spec, config.cores_resource, DEFAULT_CORES)
    return hami_ask.share(spec, WORD, count, memory, cores)
