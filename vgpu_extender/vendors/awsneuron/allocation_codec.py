"""AWS Neuron's pod annotations (no node lock).

- **only** ``hami.io/aws-neuron-devices-allocated``: HAMi's device encoding, each
  device's cores as HAMi's bitmask (``test1,AWSNeuron,0,3:;`` for both cores of a
  device);
- ``AWS_NEURON_IDS``: over the containers in order, the device indexes of an ask by
  device count, or the core indexes (``index * cores_per_device + core``) of an ask by
  cores; ``NEURON_RESOURCE_TYPE: aws.amazon.com/neuroncore`` when any ask is by cores;
- ``NEURON_ALLOC_TIME`` (Unix nanoseconds), ``NEURON_ALLOCATED: "false"`` and
  ``aws.amazon.com/predicate-node``.

A grant holds a core count; its mask takes the device's lowest cores not taken by an
earlier container of the same pod (which cores other pods hold is not known here).
Read back, a mask is its count of cores.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import AnnotationError, ContainerRequest, DeviceGrant, PodRequest
from vgpu_extender.vendors import hami_devices

ALLOCATED = "hami.io/aws-neuron-devices-allocated"
NODE_LOCK: str | None = None
IDS = "AWS_NEURON_IDS"
RESOURCE_TYPE = "NEURON_RESOURCE_TYPE"
ALLOC_TIME = "NEURON_ALLOC_TIME"
ALLOCATED_FLAG = "NEURON_ALLOCATED"
PREDICATE_NODE = "aws.amazon.com/predicate-node"
_ID = "-AWSNeuron-"


def index_of(uuid: str) -> int:
    _, found, index = uuid.rpartition(_ID)
    if not found or not index.isdigit():
        raise AnnotationError("Neuron device id must end in -AWSNeuron-<index>", value=uuid)
    return int(index)


def with_masks(
    containers: Sequence[Sequence[DeviceGrant]],
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """The grants with their core counts as masks, cores already given to an earlier
    container of the pod on the same device skipped."""
    taken: dict[str, int] = {}
    masked = []
    for grants in containers:
        row = []
        for grant in grants:
            used = taken.get(grant.uuid, 0)
            mask, bit, need = 0, 0, grant.cores
            while need > 0:
                if not used & (1 << bit):
                    mask |= 1 << bit
                    need -= 1
                bit += 1
            taken[grant.uuid] = used | mask
            row.append(DeviceGrant(grant.uuid, grant.memory_mib, mask, grant.vendor))
        masked.append(tuple(row))
    return tuple(masked)


def encode(containers: Sequence[Sequence[DeviceGrant]], *, vendor: str) -> str:
    return hami_devices.encode_containers(with_masks(containers), vendor=vendor)


def decode(value: str, *, init: tuple[bool, ...] = ()) -> tuple[tuple[DeviceGrant, ...], ...]:
    return tuple(
        tuple(DeviceGrant(g.uuid, g.memory_mib, g.cores.bit_count(), g.vendor) for g in grants)
        for grants in hami_devices.decode_containers(value, init=init)
    )


def side_annotations(
    containers: Sequence[Sequence[DeviceGrant]],
    *,
    node: str,
    bind_time: int,
    request: PodRequest | None,
    cores_per_device: int,
    core_resource: str,
    vendor: str,
) -> dict[str, str]:
    ids: list[str] = []
    by_cores = False
    for position, grants in enumerate(with_masks(containers)):
        ask = _ask_at(request, position, vendor)
        for grant in grants:
            index = index_of(grant.uuid)
            if ask is not None and ask.cores > 0:
                by_cores = True
                ids.extend(
                    str(index * cores_per_device + core)
                    for core in range(grant.cores.bit_length())
                    if grant.cores & (1 << core)
                )
            else:
                ids.append(str(index))
    annotations = {
        IDS: ",".join(ids),
        ALLOC_TIME: str(bind_time * 1_000_000_000),
        ALLOCATED_FLAG: "false",
        PREDICATE_NODE: node,
    }
    if by_cores:
        annotations[RESOURCE_TYPE] = core_resource
    return annotations


def _ask_at(request: PodRequest | None, position: int, vendor: str) -> ContainerRequest | None:
    """The container's ask of ``vendor`` (one container may ask several vendors)."""
    if request is None or position >= len(request.containers):
        return None
    return next((a for a in request.containers[position].asks if a.vendor == vendor), None)
