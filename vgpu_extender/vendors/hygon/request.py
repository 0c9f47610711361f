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

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, quantity_to_int
from vgpu_extender.vendors import hami_pod
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
        memory *= config.memory_factor
        if memory > INT32_MAX:
            raise RequestError(
                f"quantity times the memory factor {config.memory_factor} must be at most "
                f"{INT32_MAX}",
                container=name,
                field=config.memory_resource,
                value=mem_raw,
            )
    cores_raw = spec.value(config.cores_resource)
    cores = (
        DEFAULT_CORES
        if cores_raw is None
        else quantity_to_int(cores_raw, field=config.cores_resource, container=name)
    )
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory,
        memory_percent=0 if memory else 100,
        cores=cores,
        init=spec.init,
        vendor=WORD,
    )


def read_selector(annotations: Mapping[str, Any]) -> DeviceSelector:
    return DeviceSelector(
        use_types=tuple(t.lower() for t in hami_pod.listed(annotations, USE_TYPE_ANNOTATION)),
        avoid_types=tuple(t.lower() for t in hami_pod.listed(annotations, AVOID_TYPE_ANNOTATION)),
        use_uuids=hami_pod.listed(annotations, USE_UUID_ANNOTATION),
        avoid_uuids=hami_pod.listed(annotations, AVOID_UUID_ANNOTATION),
    )
