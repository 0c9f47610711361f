"""A Pod, as kube-scheduler sends it (Kubernetes JSON), read into a ``PodRequest``.

This runs for every filter, prioritize and bind call, so it reads plain dicts and only the
fields it needs. The rules are HAMi's (``GenerateResourceRequests`` and the webhook's
``MutateAdmission``), applied here too so that a pod that skipped HAMi's webhook is read
the same way:

- limits are read before requests: a value in limits wins;
- ``gpumem``, ``gpumem-percentage`` or ``gpucores`` without a count imply one device;
- memory is ``gpumem`` MiB when positive, else the percentage when positive, else the
  configured default (0: the whole device);
- absent cores become 100 (exclusive) when the percentage is 100, or when neither memory
  resource is given (a bare count is a whole card); otherwise the configured default.

Where HAMi clamps or silently drops a bad value, this raises ``RequestError`` instead:
a pod that asks for 150 % of a device should hear so, not get 100 %.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.domain.quantity import quantity_to_int, quantity_to_mib, quantity_to_milli
from vgpu_extender.vendors import gostrconv
from vgpu_extender.vendors.hami_pod import asks_mutex, listed, mapping, with_mutex
from vgpu_extender.vendors.nvidia.config import NvidiaConfig


def parse_pod(pod: Mapping[str, Any], config: NvidiaConfig) -> PodRequest:
    """Read one pod. Every container (init containers first) gets a ``ContainerRequest``,
    so positions line up with HAMi's per-container annotation segments."""
    if type(pod) is not dict and not isinstance(pod, Mapping):
        raise RequestError("pod must be a JSON object", field="pod", value=type(pod).__name__)
    metadata = mapping(pod.get("metadata"), "metadata")
    spec = mapping(pod.get("spec"), "spec")

    containers: list[ContainerRequest] = []
    # Host requests, as Kubernetes' PodRequests computes them: app containers and
    # restartable (sidecar) init containers add up; other init containers run alone.
    sidecar_cpu = sidecar_mem = init_cpu = init_mem = 0
    for index, raw in enumerate(_sequence(spec.get("initContainers"), "spec.initContainers")):
        request, cpu, mem = _container(raw, index, init=True, config=config)
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
        request, cpu, mem = _container(raw, index, init=False, config=config)
        containers.append(request)
        app_cpu += cpu
        app_mem += mem

    annotations = mapping(metadata.get("annotations"), "metadata.annotations")
    selector, numa_bind, node_policy, device_policy = _annotations(annotations, config)
    if asks_mutex(annotations, config.device_policy_annotation):
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
        selector=selector,
        numa_bind=numa_bind,
        node_policy=node_policy,
        device_policy=device_policy,
        priority=priority,
        cpu_milli=max(app_cpu, init_cpu),
        host_memory_mib=max(app_mem, init_mem),
    )


def _container(
    raw: object, index: int, *, init: bool, config: NvidiaConfig
) -> tuple[ContainerRequest, int, int]:
    """One container's device request, plus its host cpu (milli) and memory (MiB)."""
    where = f"spec.{'initContainers' if init else 'containers'}[{index}]"
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise RequestError("container must be a JSON object", field=where, value=raw)
    name = raw.get("name") or where
    if not isinstance(name, str):
        raise RequestError("container name must be a string", field=f"{where}.name", value=name)
    resources = mapping(raw.get("resources"), f"{where}.resources", container=name)
    limits = mapping(resources.get("limits"), f"{where}.resources.limits", container=name)
    requests = mapping(resources.get("requests"), f"{where}.resources.requests", container=name)

    # Host resources: Kubernetes schedules on requests; the API server copies limits into
    # absent requests, which pods that never met an API server (traces) may lack.
    cpu_raw = requests.get("cpu", limits.get("cpu"))
    mem_raw = requests.get("memory", limits.get("memory"))
    cpu = 0 if cpu_raw is None else quantity_to_milli(cpu_raw, field="cpu", container=name)
    mem = 0 if mem_raw is None else quantity_to_mib(mem_raw, field="memory", container=name)

    if not limits and not requests:
        return ContainerRequest(name=name, init=init), cpu, mem
    return _devices(name, limits, requests, init=init, config=config), cpu, mem


def _devices(
    name: str,
    limits: Mapping[str, Any],
    requests: Mapping[str, Any],
    *,
    init: bool,
    config: NvidiaConfig,
) -> ContainerRequest:
    def lookup(resource: str) -> Any:
        value = limits.get(resource)
        return requests.get(resource) if value is None else value

    count_raw = lookup(config.count_resource)
    mem_raw = lookup(config.memory_resource)
    pct_raw = lookup(config.memory_percent_resource)
    cores_raw = lookup(config.cores_resource)
    prio_raw = lookup(config.priority_resource)
    priority = (
        None
        if prio_raw is None
        else quantity_to_int(prio_raw, field=config.priority_resource, container=name)
    )
    if count_raw is None and mem_raw is None and pct_raw is None and cores_raw is None:
        return ContainerRequest(name=name, init=init, priority=priority)

    memory = (
        0
        if mem_raw is None
        else quantity_to_int(mem_raw, field=config.memory_resource, container=name)
    )
    percent = (
        0
        if pct_raw is None
        else quantity_to_int(
            pct_raw, field=config.memory_percent_resource, container=name, maximum=100
        )
    )
    cores = (
        None
        if cores_raw is None
        else quantity_to_int(cores_raw, field=config.cores_resource, container=name, maximum=100)
    )
    # HAMi's webhook adds one device when only memory or cores are given.
    count = (
        1
        if count_raw is None
        else quantity_to_int(count_raw, field=config.count_resource, container=name)
    )
    if count == 0:
        if memory or percent or cores:
            asked = next(
                resource
                for resource, value in (
                    (config.memory_resource, memory),
                    (config.memory_percent_resource, percent),
                    (config.cores_resource, cores),
                )
                if value
            )
            raise RequestError(
                f"device count is 0 but {asked} is asked for",
                container=name,
                field=config.count_resource,
                value=count_raw,
            )
        return ContainerRequest(name=name, init=init, priority=priority)

    if cores is None:
        # The webhook's defaultExclusiveCoreIfNeeded: presence decides, not value.
        exclusive = percent == 100 if pct_raw is not None else mem_raw is None
        cores = 100 if exclusive else config.default_cores
    memory_percent = 0
    if memory == 0:
        if percent > 0:
            memory_percent = percent
        elif config.default_memory_mib:
            memory = config.default_memory_mib
        else:
            memory_percent = 100
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory,
        memory_percent=memory_percent,
        cores=cores,
        init=init,
        priority=priority,
    )


def _annotations(
    annotations: Mapping[str, Any], config: NvidiaConfig
) -> tuple[DeviceSelector, bool, str | None, str | None]:
    if not annotations:
        return DeviceSelector(), False, None, None
    selector = DeviceSelector(
        use_types=_types(annotations, config.use_type_annotation),
        avoid_types=_types(annotations, config.avoid_type_annotation),
        use_uuids=listed(annotations, config.use_uuid_annotation),
        avoid_uuids=listed(annotations, config.avoid_uuid_annotation),
    )
    numa_bind = False
    numa_raw = annotations.get(config.numa_bind_annotation)
    if numa_raw is not None:
        try:
            numa_bind = gostrconv.parse_bool(
                _annotation_text(numa_raw, config.numa_bind_annotation)
            )
        except ValueError:
            raise RequestError(
                "not a boolean (use true or false)",
                field=config.numa_bind_annotation,
                value=numa_raw,
            ) from None
    return (
        selector,
        numa_bind,
        _node_policy(annotations, config),
        _device_policy(annotations, config),
    )


def _types(annotations: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """As ``listed``, lowercased: HAMi matches GPU types case-insensitively."""
    raw = annotations.get(key)
    if raw is None:
        return ()
    items = (item.strip().lower() for item in _annotation_text(raw, key).split(","))
    return tuple(dict.fromkeys(item for item in items if item))


def _node_policy(annotations: Mapping[str, Any], config: NvidiaConfig) -> str | None:
    key = config.node_policy_annotation
    raw = annotations.get(key)
    if raw is None:
        return None
    policy = _annotation_text(raw, key).strip().lower()
    if not policy:
        return None
    if policy not in config.known_node_policies:
        raise RequestError(
            f"unknown node policy; known: {', '.join(sorted(config.known_node_policies))}",
            field=key,
            value=raw,
        )
    return policy


def _device_policy(annotations: Mapping[str, Any], config: NvidiaConfig) -> str | None:
    """The first known device policy of HAMi's comma chain (``"binpack,numa"``).

    The chain's other items are accepted: ``mutex`` keeps the pod off GPUs in use
    (``asks_mutex``, a filter as in HAMi's Fit, not an order); ``numa`` and
    ``topology-aware`` are advisory (HAMi sorts by them, which our policies express
    differently).
    """
    key = config.device_policy_annotation
    raw = annotations.get(key)
    if raw is None:
        return None
    chosen: str | None = None
    for item in _annotation_text(raw, key).split(","):
        policy = item.strip().lower()
        if not policy:
            continue
        if policy in config.known_device_policies:
            chosen = chosen or policy
        elif policy not in config.advisory_device_policies:
            known = sorted(config.known_device_policies | config.advisory_device_policies)
            raise RequestError(
                f"unknown gpu policy {policy!r}; known: {', '.join(known)}", field=key, value=raw
            )
    return chosen


def _annotation_text(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise RequestError("annotation value must be a string", field=key, value=value)
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
