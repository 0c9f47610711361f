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

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.domain.quantity import (
    INT32_MAX,
    quantity_to_int,
    quantity_to_mib,
    quantity_to_milli,
)
from vgpu_extender.vendors.ascend.allocation_codec import HAMI_CORE, VNPU_MODE_ANNOTATION
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.ascend.config import AscendConfig

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def use_uuid_annotation(chip: ChipConfig) -> str:
    return f"hami.io/use-{chip.common_word}-uuid"


def avoid_uuid_annotation(chip: ChipConfig) -> str:
    # HAMi spells it "no-use", with a hyphen.
    return f"hami.io/no-use-{chip.common_word}-uuid"


def parse_pod(pod: Mapping[str, Any], chip: ChipConfig, config: AscendConfig) -> PodRequest:
    """Read one pod. Every container (init containers first) gets a ``ContainerRequest``
    of this chip, so positions line up with the chip's annotation segments."""
    if not isinstance(pod, Mapping):
        raise RequestError("pod must be a JSON object", field="pod", value=type(pod).__name__)
    metadata = _mapping(pod.get("metadata"), "metadata")
    spec = _mapping(pod.get("spec"), "spec")
    annotations = _mapping(metadata.get("annotations"), "metadata.annotations")
    mode = HAMI_CORE if annotations.get(VNPU_MODE_ANNOTATION) == HAMI_CORE else ""

    containers: list[ContainerRequest] = []
    # Host requests, as Kubernetes' PodRequests computes them (the NVIDIA vendor's rule):
    # app and restartable init containers add up; other init containers run alone.
    sidecar_cpu = sidecar_mem = init_cpu = init_mem = 0
    for index, raw in enumerate(_sequence(spec.get("initContainers"), "spec.initContainers")):
        request, cpu, mem = _container(raw, index, init=True, chip=chip, mode=mode)
        containers.append(request)
        if isinstance(raw, Mapping) and raw.get("restartPolicy") == "Always":
            sidecar_cpu += cpu
            sidecar_mem += mem
            init_cpu, init_mem = max(init_cpu, sidecar_cpu), max(init_mem, sidecar_mem)
        else:
            init_cpu = max(init_cpu, cpu + sidecar_cpu)
            init_mem = max(init_mem, mem + sidecar_mem)
    app_cpu, app_mem = sidecar_cpu, sidecar_mem
    for index, raw in enumerate(_sequence(spec.get("containers"), "spec.containers")):
        request, cpu, mem = _container(raw, index, init=False, chip=chip, mode=mode)
        containers.append(request)
        app_cpu += cpu
        app_mem += mem

    priority = spec.get("priority")
    if priority is None:
        priority = 0
    elif isinstance(priority, bool) or not isinstance(priority, int):
        raise RequestError("pod priority must be an integer", field="spec.priority", value=priority)
    return PodRequest(
        uid=_string(metadata.get("uid"), "metadata.uid", ""),
        namespace=_string(metadata.get("namespace"), "metadata.namespace", "default"),
        name=_string(metadata.get("name"), "metadata.name", ""),
        containers=tuple(containers),
        selector=DeviceSelector(
            use_uuids=_uuids(annotations, use_uuid_annotation(chip)),
            avoid_uuids=_uuids(annotations, avoid_uuid_annotation(chip)),
        ),
        priority=priority,
        cpu_milli=max(app_cpu, init_cpu),
        host_memory_mib=max(app_mem, init_mem),
    )


def _container(
    raw: object, index: int, *, init: bool, chip: ChipConfig, mode: str
) -> tuple[ContainerRequest, int, int]:
    """One container's ask of the chip, plus its host cpu (milli) and memory (MiB)."""
    where = f"spec.{'initContainers' if init else 'containers'}[{index}]"
    if not isinstance(raw, Mapping):
        raise RequestError("container must be a JSON object", field=where, value=raw)
    name = raw.get("name") or where
    if not isinstance(name, str):
        raise RequestError("container name must be a string", field=f"{where}.name", value=name)
    resources = _mapping(raw.get("resources"), f"{where}.resources", container=name)
    limits = _mapping(resources.get("limits"), f"{where}.resources.limits", container=name)
    requests = _mapping(resources.get("requests"), f"{where}.resources.requests", container=name)

    cpu_raw = requests.get("cpu", limits.get("cpu"))
    mem_raw = requests.get("memory", limits.get("memory"))
    cpu = 0 if cpu_raw is None else quantity_to_milli(cpu_raw, field="cpu", container=name)
    mem = 0 if mem_raw is None else quantity_to_mib(mem_raw, field="memory", container=name)
    return _ask(name, limits, requests, init=init, chip=chip, mode=mode), cpu, mem


def _ask(
    name: str,
    limits: Mapping[str, Any],
    requests: Mapping[str, Any],
    *,
    init: bool,
    chip: ChipConfig,
    mode: str,
) -> ContainerRequest:
    def lookup(resource: str) -> Any:
        if not resource:
            return None
        value = limits.get(resource)
        return requests.get(resource) if value is None else value

    none = ContainerRequest(name=name, init=init, vendor=chip.common_word)
    count_raw = lookup(chip.resource_name)
    if count_raw is None:
        return none
    count = quantity_to_int(count_raw, field=chip.resource_name, container=name)
    if count == 0:
        return none
    mem_raw = lookup(chip.resource_memory_name)
    memory = (
        0
        if mem_raw is None
        else quantity_to_int(mem_raw, field=chip.resource_memory_name, container=name)
    )
    if chip.memory_factor > 1:
        memory *= chip.memory_factor
        if memory > INT32_MAX:
            raise RequestError(
                f"quantity times the memory factor {chip.memory_factor} must be at most "
                f"{INT32_MAX}",
                container=name,
                field=chip.resource_memory_name,
                value=mem_raw,
            )
    cores_raw = lookup(chip.resource_core_name)
    cores = (
        0
        if cores_raw is None
        else quantity_to_int(cores_raw, field=chip.resource_core_name, container=name)
    )
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory,
        memory_percent=0 if memory else 100,
        cores=cores,
        init=init,
        vendor=chip.common_word,
        mode=mode,
    )


def _uuids(annotations: Mapping[str, Any], key: str) -> tuple[str, ...]:
    raw = annotations.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise RequestError("annotation value must be a string", field=key, value=raw)
    return tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))


def _mapping(value: object, field: str, *, container: str = "") -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise RequestError("must be a JSON object", container=container, field=field, value=value)
    return value


def _sequence(value: object, field: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise RequestError("must be a JSON array", field=field, value=value)
    return value


def _string(value: object, field: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise RequestError("must be a string", field=field, value=value)
    return value or default
