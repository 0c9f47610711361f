"""A Pod read into a ``PodRequest`` for one Ascend chip, as HAMi's
``GenerateResourceRequests`` reads it.

- the count ``huawei.com/<CW>`` comes from limits, else requests; without one the
  container asks for nothing of this chip (HAMi schedules no memory-only Ascend ask);
- memory ``huawei.com/<CW>-memory`` (limits, else requests) is taken as given, in MiB,
  times the chip's ``memoryFactor``; none asks for the whole NPU (100 percent);
- cores come from ``huawei.com/<CW>-core``;
- the pod annotation ``huawei.com/vnpu-mode: hami-core`` asks for soft split;
- ``hami.io/use-<CW>-uuid`` / ``hami.io/no-use-<CW>-uuid`` restrict the NPUs.

Where HAMi reads a bad quantity as "no request", this raises ``RequestError`` naming the
container and the resource, as the NVIDIA vendor does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.domain.quantity import INT32_MAX
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.ascend.allocation_codec import HAMI_CORE, VNPU_MODE_ANNOTATION
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.ascend.config import AscendConfig


def use_uuid_annotation(chip: ChipConfig) -> str:
    return f"hami.io/use-{chip.common_word}-uuid"


def avoid_uuid_annotation(chip: ChipConfig) -> str:
    # HAMi spells it "no-use", with a hyphen.
    return f"hami.io/no-use-{chip.common_word}-uuid"


def parse_pod(pod: Mapping[str, Any], chip: ChipConfig, config: AscendConfig) -> PodRequest:
    """Read one pod. Every container (init containers first) gets a ``ContainerRequest``
    of this chip, so positions line up with the chip's annotation segments."""
    selector = hami_pod.uuid_selector(use_uuid_annotation(chip), avoid_uuid_annotation(chip))
    return hami_pod.parse_pod(pod, lambda spec: read_ask(spec, chip), selector)


def read_ask(spec: hami_pod.ContainerSpec, chip: ChipConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, chip.resource_name)
    if count == 0:
        return hami_ask.none(spec, chip.common_word)
    factor = chip.memory_factor
    # Only a factor above 1 scales (and so bounds) the memory, as in HAMi.
    memory = (
        hami_ask.scaled_memory(
            spec,
            chip.resource_memory_name,
            factor,
            f"quantity times the memory factor {factor} must be at most {INT32_MAX}",
        )
        if factor > 1
        else hami_ask.integer(spec, chip.resource_memory_name)
    )
    cores = hami_ask.integer(spec, chip.resource_core_name)
    mode = HAMI_CORE if spec.annotations.get(VNPU_MODE_ANNOTATION) == HAMI_CORE else ""
    return hami_ask.share(spec, chip.common_word, count, memory, cores, mode=mode)
