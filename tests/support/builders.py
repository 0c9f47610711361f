"""Small builders for engine and policy tests: nodes, requests and assignments.

Device UUIDs are ``<node>-gpu<i>``, so a test can name a device without a lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    DeviceSelector,
    NodeInventory,
    PodAssignment,
    PodRequest,
)
from vgpu_extender.engine import ClusterIndex

A100 = "NVIDIA-A100-SXM4-40GB"
V100 = "NVIDIA-Tesla V100-PCIE-32GB"


def uuid(node: str, i: int) -> str:
    """The UUID ``make_node`` gives device ``i`` of ``node``."""
    return f"{node}-gpu{i}"


def make_node(
    name: str,
    gpus: int = 4,
    *,
    mem: int | Sequence[int] = 8192,
    cores: int = 100,
    count: int = 10,
    type: str | Sequence[str] = A100,
    numa: int | Sequence[int] = 0,
    unhealthy: Iterable[int] = (),
    cordoned: Iterable[int] = (),
    labels: Mapping[str, str] | None = None,
    problem: str = "",
    cpu_milli: int | None = None,
    memory_mib: int | None = None,
) -> NodeInventory:
    """A node with ``gpus`` devices; per-device values may be given as sequences."""

    def at(value: int | str | Sequence[int] | Sequence[str], i: int) -> int | str:
        if isinstance(value, int | str):
            return value
        return value[i]

    sick = set(unhealthy)
    devices = tuple(
        Device(
            uuid=uuid(name, i),
            index=i,
            count=count,
            memory_mib=int(at(mem, i)),
            cores=cores,
            type=str(at(type, i)),
            numa=int(at(numa, i)),
            healthy=i not in sick,
        )
        for i in range(gpus)
    )
    return NodeInventory(
        name=name,
        devices=devices,
        labels=dict(labels or {}),
        cordoned=frozenset(uuid(name, i) for i in cordoned),
        problem=problem,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
    )


def make_container(
    count: int = 1,
    *,
    mem: int = 0,
    pct: int = 0,
    cores: int = 0,
    init: bool = False,
    name: str = "c",
) -> ContainerRequest:
    return ContainerRequest(
        name=name, count=count, memory_mib=mem, memory_percent=pct, cores=cores, init=init
    )


def make_request(
    count: int = 1,
    *,
    mem: int = 0,
    pct: int = 0,
    cores: int = 0,
    containers: Sequence[ContainerRequest] | None = None,
    uid: str = "pod",
    use_types: Sequence[str] = (),
    avoid_types: Sequence[str] = (),
    use_uuids: Sequence[str] = (),
    avoid_uuids: Sequence[str] = (),
    numa_bind: bool = False,
    node_policy: str | None = None,
    device_policy: str | None = None,
    cpu_milli: int = 0,
    host_memory_mib: int = 0,
) -> PodRequest:
    """One container asking for ``count`` devices, unless ``containers`` is given."""
    if containers is None:
        containers = (make_container(count, mem=mem, pct=pct, cores=cores),)
    return PodRequest(
        uid=uid,
        name=uid,
        containers=tuple(containers),
        selector=DeviceSelector(
            use_types=tuple(t.lower() for t in use_types),
            avoid_types=tuple(t.lower() for t in avoid_types),
            use_uuids=tuple(use_uuids),
            avoid_uuids=tuple(avoid_uuids),
        ),
        numa_bind=numa_bind,
        node_policy=node_policy,
        device_policy=device_policy,
        cpu_milli=cpu_milli,
        host_memory_mib=host_memory_mib,
    )


def make_assignment(
    node: str,
    *containers: Sequence[tuple[int, int, int]],
    init: Sequence[bool] = (),
) -> PodAssignment:
    """An assignment from per-container lists of ``(device index, MiB, cores)``."""
    return PodAssignment(
        node,
        tuple(
            tuple(DeviceGrant(uuid(node, i), m, c) for i, m, c in grants) for grants in containers
        ),
        tuple(init),
    )


def make_index(*nodes: NodeInventory) -> ClusterIndex:
    index = ClusterIndex(initial_nodes=4, initial_slots=2)
    for node in nodes:
        index.upsert_node(node)
    return index


def use(
    index: ClusterIndex,
    uid: str,
    node: str,
    *containers: Sequence[tuple[int, int, int]],
) -> None:
    """Apply an allocation built from ``(device index, MiB, cores)`` grants."""
    index.apply(uid, make_assignment(node, *containers))


def slot_indices(assignment: PodAssignment) -> list[list[int]]:
    """Per container, the device indices granted (parsed back from the builder's UUIDs)."""
    return [[int(g.uuid.rsplit("gpu", 1)[1]) for g in grants] for grants in assignment.containers]
