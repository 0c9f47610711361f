"""MetaX asks, as HAMi's ``GenerateResourceRequests`` reads them.

- ``Metax-GPU``: the count ``metax-tech.com/gpu`` (limits, else requests) asks for whole
  cards: all memory and 100 cores each.
- ``Metax-SGPU``: **limits only**. The count ``metax-tech.com/sgpu``; ``vcore`` a
  percent (none: 100, the card alone); ``vmemory`` **without a unit in GiB**
  (``16`` is 16384 MiB), with one in bytes (``1024Mi``, ``16Gi``), floored to MiB as
  HAMi divides; none takes the whole card's memory *(inference: HAMi's default for a
  share without memory)*. A pod of app class ``online`` is charged no cores. UUIDs
  ``metax-tech.com/use-gpuuuid`` / ``nouse-gpuuuid`` restrict the sGPUs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, parse_quantity, quantity_to_int
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.metax.config import MetaxConfig

GPU_WORD = "Metax-GPU"
SGPU_WORD = "Metax-SGPU"
APP_CLASS_ANNOTATION = "metax-tech.com/sgpu-app-class"
QOS_ANNOTATION = "metax-tech.com/sgpu-qos-policy"
USE_UUID = "metax-tech.com/use-gpuuuid"
AVOID_UUID = "metax-tech.com/nouse-gpuuuid"
ONLINE = "online"
FULL_CORES = 100
_PLAIN = re.compile(r"[0-9]+")
_MIB = 2**20


def read_gpu_ask(spec: hami_pod.ContainerSpec, config: MetaxConfig) -> ContainerRequest:
    return hami_ask.whole_devices(spec, config.count_resource, GPU_WORD)


def vmemory_mib(value: Any, *, field: str, container: str = "") -> int:
    """``vmemory`` in MiB: a bare integer is GiB; a quantity with a unit is bytes,
    floored to MiB. Over int32 is a ``RequestError`` (``2100001`` GiB)."""
    text = value if isinstance(value, str) else str(value)
    if _PLAIN.fullmatch(text.strip()):
        mib = int(text) * 1024
    else:
        amount = parse_quantity(value, field=field, container=container)
        if amount < 0:
            raise RequestError(
                "quantity must not be negative", container=container, field=field, value=value
            )
        mib = math.ceil(amount) // _MIB
    if mib > INT32_MAX:
        raise RequestError(
            f"memory must be at most {INT32_MAX} MiB", container=container, field=field, value=value
        )
    return mib


def read_sgpu_ask(spec: hami_pod.ContainerSpec, config: MetaxConfig) -> ContainerRequest:
    raw = spec.limits.get(config.sgpu_resource)
    if raw is None:
        return hami_ask.none(spec, SGPU_WORD)
    count = quantity_to_int(raw, field=config.sgpu_resource, container=spec.name)
    if count == 0:
        return hami_ask.none(spec, SGPU_WORD)
    memory_raw = spec.limits.get(config.vmemory_resource)
    memory = (
        0
        if memory_raw is None
        else vmemory_mib(memory_raw, field=config.vmemory_resource, container=spec.name)
    )
    cores_raw = spec.limits.get(config.vcore_resource)
    cores = (
        FULL_CORES
        if cores_raw is None
        else quantity_to_int(cores_raw, field=config.vcore_resource, container=spec.name)
    )
    if spec.annotations.get(APP_CLASS_ANNOTATION) == ONLINE:
        cores = 0  # HAMi ignores an online pod's cores and charges none
    return hami_ask.share(spec, SGPU_WORD, count, memory, cores)


def parse_gpu_pod(pod: Mapping[str, Any], config: MetaxConfig) -> PodRequest:
    return hami_pod.parse_pod(pod, lambda spec: read_gpu_ask(spec, config))


def parse_sgpu_pod(pod: Mapping[str, Any], config: MetaxConfig) -> PodRequest:
    return hami_pod.parse_pod(
        pod,
        lambda spec: read_sgpu_ask(spec, config),
        hami_pod.uuid_selector(USE_UUID, AVOID_UUID),
    )
