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

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.vendors import hami_ask, hami_pod
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
    count = hami_ask.integer(spec, chip.count_resource)
    if count == 0:
        return hami_ask.none(spec, chip.common_word)
    memory = hami_ask.scaled_memory(spec, chip.memory_resource, MEMORY_UNIT_MIB)
    cores = hami_ask.integer(spec, chip.cores_resource)
    return hami_ask.share(spec, chip.common_word, count, memory, cores)
