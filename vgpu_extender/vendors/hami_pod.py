"""Reading a pod as HAMi's ``Resourcereqs`` does, for a vendor that reads each container
on its own (``GenerateResourceRequests``): init containers first, one ``ContainerRequest``
per container so positions line up with the vendor's annotation segments.

The vendor gives the rule for one container (``AskReader``); the walk, the pod's
selector annotations and the host requests (as Kubernetes' ``PodRequests`` computes them,
the NVIDIA vendor's rule) are the same for every vendor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.domain.quantity import quantity_to_mib, quantity_to_milli

_EMPTY: Mapping[str, Any] = MappingProxyType({})

#: HAMi's per-pod device policy: ``binpack``, ``spread``, ``numa``, ``mutex``,
#: ``topology-aware``, or a comma chain of them.
DEVICE_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
#: The chain item that keeps the pod off devices in use (``util.PolicyContains``).
MUTEX = "mutex"


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """What a vendor reads of one container: its name, resources and the pod's
    annotations (some vendors read a pod annotation per container)."""

    name: str
    limits: Mapping[str, Any]
    requests: Mapping[str, Any]
    init: bool
    annotations: Mapping[str, Any]

    def value(self, resource: str) -> Any:
        """The resource from limits, else requests; None when neither has it."""
        if not resource:
            return None
        found = self.limits.get(resource)
        return self.requests.get(resource) if found is None else found


#: One container's ask of the vendor (``count == 0``: none, but the position is kept).
AskReader = Callable[[ContainerSpec], ContainerRequest]
#: The pod's device selector, from its annotations.
SelectorReader = Callable[[Mapping[str, Any]], DeviceSelector]


def parse_pod(
    pod: Mapping[str, Any], ask: AskReader, selector: SelectorReader | None = None
) -> PodRequest:
    """One pod; ``RequestError`` on a malformed one."""
    if not isinstance(pod, Mapping):
        raise RequestError("pod must be a JSON object", field="pod", value=type(pod).__name__)
    metadata = mapping(pod.get("metadata"), "metadata")
    spec = mapping(pod.get("spec"), "spec")
    annotations = mapping(metadata.get("annotations"), "metadata.annotations")

    containers: list[ContainerRequest] = []
    sidecar_cpu = sidecar_mem = init_cpu = init_mem = 0
    for index, raw in enumerate(_sequence(spec.get("initContainers"), "spec.initContainers")):
        request, cpu, mem = _container(raw, index, True, annotations, ask)
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
        request, cpu, mem = _container(raw, index, False, annotations, ask)
        containers.append(request)
        app_cpu += cpu
        app_mem += mem

    if asks_mutex(annotations):
        containers = [with_mutex(c) for c in containers]
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
        selector=DeviceSelector() if selector is None else selector(annotations),
        priority=priority,
        cpu_milli=max(app_cpu, init_cpu),
        host_memory_mib=max(app_mem, init_mem),
    )


def asks_mutex(annotations: Mapping[str, Any], key: str = DEVICE_POLICY_ANNOTATION) -> bool:
    """Whether the pod's device policy chain names ``mutex`` (items trimmed, any case);
    a value that is not a string is a ``RequestError``. Other items are the NVIDIA
    vendor's to read."""
    raw = annotations.get(key)
    if raw is None:
        return False
    if not isinstance(raw, str):
        raise RequestError("annotation value must be a string", field=key, value=raw)
    return any(item.strip().lower() == MUTEX for item in raw.split(","))


def with_mutex(container: ContainerRequest) -> ContainerRequest:
    """``container`` (and its asks of other vendors) under the pod's mutex policy."""
    also = tuple(replace(ask, mutex=True) for ask in container.also)
    return replace(container, mutex=True, also=also)


def uuid_selector(use_key: str, avoid_key: str) -> SelectorReader:
    """A selector from a pair of comma-separated UUID annotations."""

    def read(annotations: Mapping[str, Any]) -> DeviceSelector:
        return DeviceSelector(
            use_uuids=listed(annotations, use_key), avoid_uuids=listed(annotations, avoid_key)
        )

    return read


def listed(annotations: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A comma-separated annotation's items, stripped, empty ones and repeats dropped."""
    raw = annotations.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise RequestError("annotation value must be a string", field=key, value=raw)
    return tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))


def mapping(value: object, field: str, *, container: str = "") -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise RequestError("must be a JSON object", container=container, field=field, value=value)
    return value


def _container(
    raw: object, index: int, init: bool, annotations: Mapping[str, Any], ask: AskReader
) -> tuple[ContainerRequest, int, int]:
    where = f"spec.{'initContainers' if init else 'containers'}[{index}]"
    if not isinstance(raw, Mapping):
        raise RequestError("container must be a JSON object", field=where, value=raw)
    name = raw.get("name") or where
    if not isinstance(name, str):
        raise RequestError("container name must be a string", field=f"{where}.name", value=name)
    resources = mapping(raw.get("resources"), f"{where}.resources", container=name)
    limits = mapping(resources.get("limits"), f"{where}.resources.limits", container=name)
    requests = mapping(resources.get("requests"), f"{where}.resources.requests", container=name)
    cpu_raw = requests.get("cpu", limits.get("cpu"))
    mem_raw = requests.get("memory", limits.get("memory"))
    cpu = 0 if cpu_raw is None else quantity_to_milli(cpu_raw, field="cpu", container=name)
    mem = 0 if mem_raw is None else quantity_to_mib(mem_raw, field="memory", container=name)
    return ask(ContainerSpec(name, limits, requests, init, annotations)), cpu, mem


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
