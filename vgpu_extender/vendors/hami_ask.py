"""The pieces of one container's ask that HAMi's vendors read alike in their
``GenerateResourceRequests``: an integer resource (limits, else requests), memory in a
vendor's unit that must fit an int32 of MiB, whole devices, a share of devices, and a
selector of device types and UUIDs. Each vendor's ``read_ask`` composes them in its order
(the first bad quantity is the one reported)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, DeviceSelector, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, quantity_to_int
from vgpu_extender.vendors.hami_pod import ContainerSpec, SelectorReader, listed

FULL_PERCENT = 100


def integer(spec: ContainerSpec, resource: str, default: int = 0) -> int:
    """The resource as an integer; ``default`` when the container does not name it."""
    raw = spec.value(resource)
    if raw is None:
        return default
    return quantity_to_int(raw, field=resource, container=spec.name)


def scaled_memory(
    spec: ContainerSpec, resource: str, factor: int, over_message: str | None = None
) -> int:
    """Memory asked in units of ``factor`` MiB, in MiB (0 when not asked); more than an
    int32 of MiB is a ``RequestError`` (HAMi's Go int32 would overflow)."""
    raw = spec.value(resource)
    if raw is None:
        return 0
    memory = quantity_to_int(raw, field=resource, container=spec.name) * factor
    if memory > INT32_MAX:
        raise RequestError(
            over_message or f"quantity times {factor} MiB must be at most {INT32_MAX} MiB",
            container=spec.name,
            field=resource,
            value=raw,
        )
    return memory


def none(spec: ContainerSpec, vendor: str) -> ContainerRequest:
    """No ask of the vendor; the container keeps its position."""
    return ContainerRequest(name=spec.name, init=spec.init, vendor=vendor)


def share(
    spec: ContainerSpec, vendor: str, count: int, memory_mib: int, cores: int, *, mode: str = ""
) -> ContainerRequest:
    """``count`` devices of ``memory_mib`` each (0: the whole memory) and ``cores``, in
    the way of sharing ``mode`` (empty: the device's)."""
    return ContainerRequest(
        name=spec.name,
        count=count,
        memory_mib=memory_mib,
        memory_percent=0 if memory_mib else FULL_PERCENT,
        cores=cores,
        init=spec.init,
        vendor=vendor,
        mode=mode,
    )


def whole_devices(spec: ContainerSpec, resource: str, vendor: str) -> ContainerRequest:
    """A count of whole devices (all memory, all cores); none when absent or 0."""
    count = integer(spec, resource)
    if count == 0:
        return none(spec, vendor)
    return ContainerRequest(
        name=spec.name,
        count=count,
        memory_percent=FULL_PERCENT,
        cores=FULL_PERCENT,
        init=spec.init,
        vendor=vendor,
    )


def typed_selector(
    use_type_key: str, avoid_type_key: str, use_uuid_key: str, avoid_uuid_key: str
) -> SelectorReader:
    """A selector from comma-separated type annotations (matched case-insensitively, so
    kept lower-case) and UUID annotations."""

    def read(annotations: Mapping[str, Any]) -> DeviceSelector:
        return DeviceSelector(
            use_types=tuple(t.lower() for t in listed(annotations, use_type_key)),
            avoid_types=tuple(t.lower() for t in listed(annotations, avoid_type_key)),
            use_uuids=listed(annotations, use_uuid_key),
            avoid_uuids=listed(annotations, avoid_uuid_key),
        )

    return read
