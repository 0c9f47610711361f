"""HAMi's Moore Threads ``MutateAdmission``, as a pure function of a container.

A container with the count (limits, else requests) uses the GPUs; a count of 0 or
less is refused. Several GPUs are whole: limits ``sgpu-core = 16 x n`` and
``sgpu-memory = 96 x n``, and the pod annotation ``mthreads.com/request-gpu-num:
<n>`` (``pod_annotations_set``: written over a value the pod has, as HAMi's webhook
writes it; of several such containers the last one's count stands, as it walks them).
One GPU with no memory limit gets the same whole-GPU limits; one with a memory limit
must ask one of 2, 4, 8, 16, 32, 64 or 96 units. The error texts are HAMi's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import parse_quantity, quantity_to_int
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.mthreads.allocation_codec import REQUEST_GPU_NUM_ANNOTATION
from vgpu_extender.vendors.mthreads.config import (
    CORES_PER_GPU,
    MEMORY_UNITS_PER_GPU,
    MthreadsConfig,
)

LEGAL_MEMORY_UNITS = (2, 4, 8, 16, 32, 64, 96)
INVALID_MEMORY = "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]"


def hami_error(message: str, *, field: str, value: object) -> RequestError:
    """A ``RequestError`` whose text is exactly HAMi's ``message``."""
    error = RequestError(message)
    error.field = field
    error.value = value
    return error


def requested_count(container: Mapping[str, Any], config: MthreadsConfig) -> int | None:
    """The count HAMi's webhook reads (limits, else requests); None when absent."""
    limits, requests = _resources(container)
    raw = limits.get(config.count_resource)
    if raw is None:
        raw = requests.get(config.count_resource)
    if raw is None:
        return None
    amount = parse_quantity(raw, field=config.count_resource)
    if amount <= 0:
        raise hami_error(
            f"{config.count_resource} must be greater than 0",
            field=config.count_resource,
            value=raw,
        )
    return quantity_to_int(raw, field=config.count_resource)


def container_admission(
    container: Mapping[str, Any], config: MthreadsConfig
) -> ContainerAdmission | None:
    count = requested_count(container, config)
    if count is None:
        return None
    limits, _ = _resources(container)
    whole = {
        config.cores_resource: str(count * CORES_PER_GPU),
        config.memory_resource: str(count * MEMORY_UNITS_PER_GPU),
    }
    memory_raw = limits.get(config.memory_resource)
    if count == 1 and memory_raw is not None:
        if _units(memory_raw) not in LEGAL_MEMORY_UNITS:
            raise hami_error(INVALID_MEMORY, field=config.memory_resource, value=memory_raw)
        return ContainerAdmission(uses=True)
    changed = {key: value for key, value in whole.items() if str(limits.get(key)) != value}
    return ContainerAdmission(
        limits=changed, uses=True, pod_annotations_set=_count_annotation(count)
    )


def pod_annotations(
    containers: Sequence[Mapping[str, Any]], config: MthreadsConfig
) -> dict[str, str]:
    """The pod annotation HAMi's webhook adds: ``request-gpu-num`` of the last container
    asking for several GPUs."""
    annotations: dict[str, str] = {}
    for container in containers:
        count = requested_count(container, config)
        if count is not None:
            annotations.update(_count_annotation(count))
    return annotations


def _count_annotation(count: int) -> dict[str, str]:
    """``request-gpu-num`` for a container asking for several (whole) GPUs."""
    return {REQUEST_GPU_NUM_ANNOTATION: str(count)} if count > 1 else {}


def _units(value: object) -> int | None:
    """Go's ``AsInt64`` of the memory quantity; None when it is not a whole number."""
    try:
        amount = parse_quantity(value)  # type: ignore[arg-type]
    except RequestError:
        return None
    return amount.numerator if amount.denominator == 1 else None


def _resources(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}, {}
    limits, requests = resources.get("limits"), resources.get("requests")
    return (
        limits if isinstance(limits, Mapping) else {},
        requests if isinstance(requests, Mapping) else {},
    )
