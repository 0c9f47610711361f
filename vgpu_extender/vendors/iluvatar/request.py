"""A Pod read for one Iluvatar chip as HAMi's ``GenerateResourceRequests`` reads it.

- the count (limits, else requests) of ``<CW>-vgpu``; none or 0 asks for nothing;
- memory ``.vMem`` in units of 256 MiB, a whole number whose MiB fit an int32; none
  asks for the whole GPU (100 percent);
- cores ``.vCore`` in percent, **0 when absent** (the webhook writes ``count x 100``
  for several GPUs, which the Fit reads as 100: whole GPUs);
- ``hami.io/use-<CW>-uuid`` / ``hami.io/no-use-<CW>-uuid`` restrict the GPUs.

A bad quantity raises ``RequestError`` naming the container and the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, quantity_to_int
from vgpu_extender.vendors import hami_pod
from vgpu_extender.vendors.iluvatar.config import MEMORY_UNIT_MIB, IluvatarChip


def use_uuid_annotation(chip: IluvatarChip) -> str:
    return f"hami.io/use-{chip.common_word}-uuid"


def avoid_uuid_annotation(chip: IluvatarChip) -> str:
    # HAMi spells it "no-use", with a hyphen.
    return f"hami.io/no-use-{chip.common_word}-uuid"


def parse_pod(pod: Mapping[str, Any], chip: IluvatarChip) -> PodRequest:
    """Read one pod: one ``ContainerRequest`` per container, init containers first."""
    selector = hami_pod.uuid_selector(use_uuid_annotation(chip), avoid_uuid_annotation(chip))
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, chip), selector)


def read_ask(spec: hami_pod.ContainerSpec, chip: IluvatarChip) -> ContainerRequest:
    name = spec.name
    none = ContainerRequest(name=name, init=spec.init, vendor=chip.common_word)
    count_raw = spec.value(chip.count_resource)
    if count_raw is None:
        return none
    count = quantity_to_int(count_raw, field=chip.count_resource, container=name)
    if count == 0:
        return none
    memory = 0
    mem_raw = spec.value(chip.memory_resource)
    if mem_raw is not None:
        memory = quantity_to_int(mem_raw, field=chip.memory_resource, container=name)
        memory *= MEMORY_UNIT_MIB
        if memory > INT32_MAX:
            raise RequestError(
                f"quantity times {MEMORY_UNIT_MIB} MiB must be at most {INT32_MAX} MiB",
                container=name,
                field=chip.memory_resource,
                value=mem_raw,
            )
    cores_raw = spec.value(chip.cores_resource)
    cores = (
        0
        if cores_raw is None
        else quantity_to_int(cores_raw, field=chip.cores_resource, container=name)
    )
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory,
        memory_percent=0 if memory else 100,
        cores=cores,
        init=spec.init,
        vendor=chip.common_word,
    )
