"""A Pod read as HAMi's Hygon ``GenerateResourceRequests`` reads it.

- the count (limits, else requests) must be 1..int32; none or 0 asks for no DCU (a
  memory-only ask is not scheduled);
- memory is MiB times the configured ``memoryFactor``; none asks for the whole DCU;
- cores are percent and default to 100, so a bare count asks for whole DCUs;
- ``hygon.com/use-dcutype`` / ``nouse-dcutype`` restrict the DCU types
  (case-insensitive substrings, comma lists, e.g. ``DCU-K100_AI``) and
  ``hygon.com/use-gpuuuid`` / ``nouse-gpuuuid`` the DCUs (``DCU-<serial>``).

A bad quantity raises ``RequestError`` naming the container and the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.domain.quantity import INT32_MAX
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.hygon.config import WORD, HygonConfig

USE_TYPE_ANNOTATION = "hygon.com/use-dcutype"
AVOID_TYPE_ANNOTATION = "hygon.com/nouse-dcutype"
USE_UUID_ANNOTATION = "hygon.com/use-gpuuuid"
AVOID_UUID_ANNOTATION = "hygon.com/nouse-gpuuuid"
DEFAULT_CORES = 100


def parse_pod(pod: Mapping[str, Any], config: HygonConfig) -> PodRequest:
    """Read one pod: one ``ContainerRequest`` per container, init containers first."""
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, config), read_selector)


def read_ask(spec: hami_pod.ContainerSpec, config: HygonConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, config.count_resource)
    if count == 0:
        return hami_ask.none(spec, WORD)
    factor = config.memory_factor
    memory = hami_ask.scaled_memory(
        spec,
        config.memory_resource,
        factor,
        f"quantity times the memory factor {factor} must be at most {INT32_MAX}",
    )
    cores = hami_ask.integer(spec, config.cores_resource, DEFAULT_CORES)
    return hami_ask.share(spec, WORD, count, memory, cores)


read_selector = hami_ask.typed_selector(
    USE_TYPE_ANNOTATION, AVOID_TYPE_ANNOTATION, USE_UUID_ANNOTATION, AVOID_UUID_ANNOTATION
)
