"""HAMi's pod device annotation and the annotations patched onto a pod at bind.

The value lists, per container (init containers first), ``UUID,NVIDIA,memMiB,cores:`` for
each device, then ``;``. A container without devices keeps its empty ``;`` segment so
positions line up with the pod's containers: HAMi's device plugin pops one segment per
kubelet Allocate call, and the scheduler rebuilds usage from the ``allocated`` copy.

HAMi's decoder reads a bad number as 0 and skips short entries, which turns a corrupt
annotation into a wrong usage count; here it raises ``AnnotationError`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant, PodAssignment
from vgpu_extender.vendors import gostrconv, hami_devices
from vgpu_extender.vendors.hami_vendor import BIND_PHASE_ALLOCATING, check_bind
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

__all__ = [
    "BIND_PHASE_ALLOCATING",
    "bind_annotations",
    "decode_assignment",
    "encode_assignment",
    "encode_containers",
]


def encode_assignment(assignment: PodAssignment, *, vendor: str = "NVIDIA") -> str:
    """The annotation value for the assignment's containers, in their order."""
    return hami_devices.encode_containers(assignment.containers, vendor=vendor)


def encode_containers(
    containers: Iterable[Sequence[DeviceGrant]], *, vendor: str = "NVIDIA"
) -> str:
    """Grants per container as HAMi writes them (``hami_devices``, every vendor's rule).
    A grant's own ``vendor`` word is kept; an empty one becomes ``vendor``."""
    return hami_devices.encode_containers(containers, vendor=vendor)


def decode_assignment(
    value: str, *, init: tuple[bool, ...] = ()
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """Grants per container. With ``init`` (one flag per container of the pod) the value
    must have exactly that many container segments."""
    if not isinstance(value, str):
        raise AnnotationError("device annotation must be a string", value=value)
    text = value.strip()
    segments = text.split(";") if text else []
    if segments and segments[-1] == "":
        segments.pop()  # the ';' that closes the last container
    if init and len(segments) != len(init):
        raise AnnotationError(
            f"device annotation has {len(segments)} container segment(s) "
            f"but the pod has {len(init)} container(s)",
            value=value,
        )
    return tuple(_decode_container(position, segment) for position, segment in enumerate(segments))


def bind_annotations(
    assignment: PodAssignment, *, bind_time: int, config: NvidiaConfig
) -> dict[str, str]:
    """What HAMi's device plugin looks for: the node, the devices (twice: ``to-allocate``
    is consumed by Allocate, ``allocated`` stays for usage rebuilds), and the bind phase
    and time by which it picks the pending pod on its node."""
    check_bind(assignment, bind_time)
    devices = encode_assignment(assignment, vendor=config.vendor_word)
    return {
        config.node_annotation: assignment.node,
        config.to_allocate_annotation: devices,
        config.allocated_annotation: devices,
        config.bind_phase_annotation: BIND_PHASE_ALLOCATING,
        config.bind_time_annotation: str(bind_time),
    }


def _decode_container(position: int, segment: str) -> tuple[DeviceGrant, ...]:
    grants: list[DeviceGrant] = []
    seen: set[str] = set()
    for entry in segment.split(":"):
        if not entry:
            continue  # the ':' that closes the last device
        fields = entry.split(",")
        if len(fields) < 4:
            raise AnnotationError(
                f"container #{position}: device entry needs uuid,vendor,memMiB,cores "
                f"(at least 4 comma-separated fields), got {len(fields)}",
                value=entry,
            )
        uuid, vendor = fields[0], fields[1]
        if not uuid or uuid != uuid.strip():
            raise AnnotationError(
                f"container #{position}: device uuid is empty or padded", value=entry
            )
        if uuid in seen:
            raise AnnotationError(
                f"container #{position}: device {uuid!r} is listed twice", value=segment
            )
        seen.add(uuid)
        grants.append(
            DeviceGrant(
                uuid=uuid,
                memory_mib=_number(position, entry, fields[2], "memory"),
                cores=_number(position, entry, fields[3], "cores"),
                vendor=vendor,
            )
        )
    return tuple(grants)


def _number(position: int, entry: str, text: str, name: str) -> int:
    try:
        number = gostrconv.parse_int(text, bits=32)
    except ValueError:
        raise AnnotationError(
            f"container #{position}: device {name} must be an integer, got {text!r}", value=entry
        ) from None
    if number < 0:
        raise AnnotationError(
            f"container #{position}: device {name} must not be negative, got {number}", value=entry
        )
    return number
