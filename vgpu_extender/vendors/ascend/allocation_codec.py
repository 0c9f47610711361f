"""An Ascend chip's pod annotations: HAMi's device encoding under the chip's keys, and
what the chip's device plugin reads at Allocate.

Per chip (CW), HAMi's ``PatchAnnotations`` writes ``hami.io/<CW>-devices-to-allocate``
(consumed by the plugin) and ``hami.io/<CW>-devices-allocated`` (the record usage is
rebuilt from), ``predicate-time`` and ``huawei.com/<CW>``: a JSON list, one entry per
device across the containers, of ``{UUID, temp, memory, core}`` with Go's ``omitempty``
(the template name ``temp`` only for a hard-split vNPU).
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import DeviceGrant, PodAssignment, PodRequest
from vgpu_extender.vendors import hami_devices, hami_vendor
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.hami_vendor import (
    BIND_PHASE_ALLOCATING,
    BIND_PHASE_ANNOTATION,
    BIND_TIME_ANNOTATION,
    NODE_ANNOTATION,
)

#: The pod annotation that asks for soft split (HAMi-core), and its one accepted value.
VNPU_MODE_ANNOTATION = "huawei.com/vnpu-mode"
HAMI_CORE = "hami-core"
PREDICATE_TIME_ANNOTATION = "predicate-time"


def to_allocate_annotation(chip: ChipConfig) -> str:
    return f"hami.io/{chip.common_word}-devices-to-allocate"


def allocated_annotation(chip: ChipConfig) -> str:
    return f"hami.io/{chip.common_word}-devices-allocated"


def runtime_annotation(chip: ChipConfig) -> str:
    return f"huawei.com/{chip.common_word}"


def chip_containers(
    assignment: PodAssignment, chip: ChipConfig
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """The assignment's grants of this chip only, per container (every position kept)."""
    return hami_vendor.chip_containers(assignment, chip.common_word)


def encode_assignment(assignment: PodAssignment, chip: ChipConfig) -> str:
    """The chip's device annotation value: its grants, every container's slot kept."""
    return hami_devices.encode_containers(
        chip_containers(assignment, chip), vendor=chip.common_word
    )


def decode_assignment(
    value: str, *, init: tuple[bool, ...] = ()
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """Grants per container (each grant's ``vendor`` is the type written, the CW)."""
    return hami_devices.decode_containers(value, init=init)


def is_hami_core(request: PodRequest | None, chip: ChipConfig) -> bool:
    """Whether the pod's asks of this chip are for soft split (HAMi-core)."""
    if request is None:
        return False
    word = chip.common_word
    return any(ask.vendor == word and ask.mode == HAMI_CORE for ask in request.device_containers)


def runtime_info(
    containers: Sequence[Sequence[DeviceGrant]], chip: ChipConfig, *, hami_core: bool
) -> str:
    """``huawei.com/<CW>``: ``[{"UUID":…,"temp":…,"memory":…,"core":…}]`` in Go's field
    order, zero and empty fields left out. Hard split names the template the charged
    memory rounds to (none for a whole card); HAMi-core names none."""
    entries: list[str] = []
    for grants in containers:
        for grant in grants:
            parts = []
            if grant.uuid:
                parts.append('"UUID":' + hami_devices.go_json_string(grant.uuid))
            template = "" if hami_core else chip.trim_memory(grant.memory_mib)[1]
            if template:
                parts.append('"temp":' + hami_devices.go_json_string(template))
            if grant.memory_mib:
                parts.append(f'"memory":{grant.memory_mib}')
            if grant.cores:
                parts.append(f'"core":{grant.cores}')
            entries.append("{" + ",".join(parts) + "}")
    return "[" + ",".join(entries) + "]"


def bind_annotations(
    assignment: PodAssignment,
    *,
    bind_time: int,
    request: PodRequest | None,
    chip: ChipConfig,
) -> dict[str, str]:
    """The chip's annotations for the pod at bind; ``{}`` when the pod has no device of
    this chip (HAMi pads such a pod on a node carrying the chip with ``";"`` and
    ``null``; nothing is written here instead). Without ``request`` the pod reads as
    hard split, HAMi's default."""
    hami_vendor.check_bind(assignment, bind_time)
    containers = chip_containers(assignment, chip)
    if not any(containers):
        return {}
    devices = hami_devices.encode_containers(containers, vendor=chip.common_word)
    hami_core = is_hami_core(request, chip)
    return {
        NODE_ANNOTATION: assignment.node,
        to_allocate_annotation(chip): devices,
        allocated_annotation(chip): devices,
        runtime_annotation(chip): runtime_info(containers, chip, hami_core=hami_core),
        PREDICATE_TIME_ANNOTATION: str(bind_time),
        BIND_PHASE_ANNOTATION: BIND_PHASE_ALLOCATING,
        BIND_TIME_ANNOTATION: str(bind_time),
    }


__all__ = [
    "BIND_PHASE_ALLOCATING",
    "BIND_PHASE_ANNOTATION",
    "BIND_TIME_ANNOTATION",
    "HAMI_CORE",
    "NODE_ANNOTATION",
    "PREDICATE_TIME_ANNOTATION",
    "VNPU_MODE_ANNOTATION",
    "allocated_annotation",
    "bind_annotations",
    "chip_containers",
    "decode_assignment",
    "encode_assignment",
    "is_hami_core",
    "runtime_annotation",
    "runtime_info",
    "to_allocate_annotation",
]
