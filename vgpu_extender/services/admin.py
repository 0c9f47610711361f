"""Read models for operators: per node and per GPU, what is registered, used and free.

Two sources give the same reports: a running extender reads node inventories from its
index (in memory) and pods from the store; the ``inspect`` command, with no server,
reads both from the store. Usage is always computed from the pods' allocations (with
HAMi's init-container collapse), so the pods listed on a GPU add up to its usage.

*Fragmentation* is the share of a node's free GPU memory that a pod asking for a whole
GPU could not use: free memory on GPUs that already hold a pod, or that have no free
slot or cores left. 0 means every free MiB sits on an idle GPU; unhealthy and cordoned
GPUs are left out, since nothing can be placed there anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from vgpu_extender import store
from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.store.sessions import Sessions


@dataclass(frozen=True, slots=True)
class PodShare:
    """What one pod holds on one GPU (``containers``: its container indices there)."""

    uid: str
    namespace: str
    name: str
    state: str
    memory_mib: int
    cores: int
    containers: tuple[int, ...]
    #: The vendor's name for the share (Ascend's vNPU template), or "".
    label: str = ""


@dataclass(frozen=True, slots=True)
class DeviceReport:
    uuid: str
    index: int
    type: str
    numa: int
    mode: str
    healthy: bool
    cordoned: bool
    memory_mib: int
    memory_used_mib: int
    cores: int
    cores_used: int
    slots: int
    slots_used: int
    pods: tuple[PodShare, ...]
    #: The device's vendor word: NVIDIA, or an Ascend chip's CommonWord.
    vendor: str = "NVIDIA"

    @property
    def memory_free_mib(self) -> int:
        return max(0, self.memory_mib - self.memory_used_mib)

    @property
    def cores_free(self) -> int:
        return max(0, self.cores - self.cores_used)

    @property
    def slots_free(self) -> int:
        return max(0, self.slots - self.slots_used)

    @property
    def schedulable(self) -> bool:
        return self.healthy and not self.cordoned

    @property
    def fragment_mib(self) -> int:
        """Free memory a whole-GPU pod could not use (0 on an idle or full GPU)."""
        if not self.schedulable:
            return 0
        stranded = self.memory_used_mib > 0 or self.slots_used > 0
        stranded = stranded or self.slots_free == 0 or self.cores_free == 0
        return self.memory_free_mib if stranded else 0


@dataclass(frozen=True, slots=True)
class NodeReport:
    name: str
    labels: Mapping[str, str]
    problem: str
    devices: tuple[DeviceReport, ...]

    @property
    def gpus(self) -> int:
        return len(self.devices)

    @property
    def healthy_gpus(self) -> int:
        return sum(d.healthy for d in self.devices)

    @property
    def cordoned_gpus(self) -> int:
        return sum(d.cordoned for d in self.devices)

    @property
    def memory_mib(self) -> int:
        return sum(d.memory_mib for d in self.devices)

    @property
    def memory_used_mib(self) -> int:
        return sum(d.memory_used_mib for d in self.devices)

    @property
    def memory_free_mib(self) -> int:
        return sum(d.memory_free_mib for d in self.devices)

    @property
    def cores(self) -> int:
        return sum(d.cores for d in self.devices)

    @property
    def cores_used(self) -> int:
        return sum(d.cores_used for d in self.devices)

    @property
    def cores_free(self) -> int:
        return sum(d.cores_free for d in self.devices)

    @property
    def allocations(self) -> int:
        """Pods holding at least one GPU of this node."""
        return len({p.uid for d in self.devices for p in d.pods})

    @property
    def schedulable_free_mib(self) -> int:
        return sum(d.memory_free_mib for d in self.devices if d.schedulable)

    @property
    def fragment_mib(self) -> int:
        return sum(d.fragment_mib for d in self.devices)

    @property
    def fragmentation(self) -> float:
        return _ratio(self.fragment_mib, self.schedulable_free_mib)


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    nodes: int
    nodes_with_problems: int
    gpus: int
    unhealthy_gpus: int
    cordoned_gpus: int
    memory_mib: int
    memory_used_mib: int
    cores: int
    cores_used: int
    slots: int
    slots_used: int
    pods: int
    pending_reservations: int
    fragmentation: float
    #: Running pods whose allocation could not be imported (``services.conflicts``).
    conflicts: int = 0

    @property
    def memory_free_mib(self) -> int:
        return max(0, self.memory_mib - self.memory_used_mib)

    @property
    def memory_utilisation(self) -> float:
        return _ratio(self.memory_used_mib, self.memory_mib)

    @property
    def cores_utilisation(self) -> float:
        return _ratio(self.cores_used, self.cores)


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole > 0 else 0.0


# --------------------------------------------------------------------------- building
def build_reports(
    inventories: Iterable[NodeInventory],
    pods: Mapping[str, store.StoredPod],
    *,
    label: Callable[[Device, int], str] | None = None,
) -> list[NodeReport]:
    """Reports for ``inventories``, with usage summed from the pods' allocations;
    ``label`` names a share of a device (its vendor's word for it)."""
    inventories = list(inventories)
    devices = {d.uuid: d for inv in inventories for d in inv.devices} if label else {}
    shares: dict[str, list[PodShare]] = {}
    for uid, (assignment, meta) in pods.items():
        positions: dict[str, list[int]] = {}
        for position, grants in enumerate(assignment.containers):
            for grant in grants:
                positions.setdefault(grant.uuid, []).append(position)
        for uuid, use in assignment.footprint().items():
            shares.setdefault(uuid, []).append(
                PodShare(
                    uid=uid,
                    namespace=meta.namespace,
                    name=meta.name,
                    state=meta.state.value,
                    memory_mib=use.memory_mib,
                    cores=use.cores,
                    containers=tuple(positions.get(uuid, ())),
                    label=_label(label, devices.get(uuid), use.memory_mib),
                )
            )
    return [
        NodeReport(
            name=inv.name,
            labels=dict(inv.labels),
            problem=inv.problem,
            devices=tuple(_device(d, inv, shares.get(d.uuid, [])) for d in inv.devices),
        )
        for inv in sorted(inventories, key=lambda i: i.name)
    ]


def _label(label: Callable[[Device, int], str] | None, device: Device | None, memory: int) -> str:
    return label(device, memory) if label is not None and device is not None else ""


def _device(device: Device, inventory: NodeInventory, pods: list[PodShare]) -> DeviceReport:
    ordered = tuple(sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)))
    return DeviceReport(
        uuid=device.uuid,
        index=device.index,
        type=device.type,
        numa=device.numa,
        mode=device.mode,
        healthy=device.healthy,
        cordoned=device.uuid in inventory.cordoned,
        memory_mib=device.memory_mib,
        memory_used_mib=sum(p.memory_mib for p in ordered),
        cores=device.cores,
        cores_used=sum(p.cores for p in ordered),
        slots=device.count,
        slots_used=len(ordered),
        pods=ordered,
        vendor=device.vendor,
    )


def summarize(
    reports: Iterable[NodeReport], pods: Mapping[str, store.StoredPod], *, conflicts: int = 0
) -> ClusterSummary:
    nodes = list(reports)
    devices = [d for n in nodes for d in n.devices]
    free = sum(n.schedulable_free_mib for n in nodes)
    return ClusterSummary(
        nodes=len(nodes),
        nodes_with_problems=sum(bool(n.problem) for n in nodes),
        gpus=len(devices),
        unhealthy_gpus=sum(not d.healthy for d in devices),
        cordoned_gpus=sum(d.cordoned for d in devices),
        memory_mib=sum(d.memory_mib for d in devices),
        memory_used_mib=sum(d.memory_used_mib for d in devices),
        cores=sum(d.cores for d in devices),
        cores_used=sum(d.cores_used for d in devices),
        slots=sum(d.slots for d in devices),
        slots_used=sum(d.slots_used for d in devices),
        pods=len(pods),
        pending_reservations=sum(
            meta.state is store.AllocationState.RESERVED for _, meta in pods.values()
        ),
        fragmentation=_ratio(sum(n.fragment_mib for n in nodes), free),
        conflicts=conflicts,
    )


# --------------------------------------------------------------------------- sources
def index_inventories(cluster: ClusterState, node: str | None = None) -> list[NodeInventory]:
    """Inventories as the index holds them (all, or the one named; [] if unknown)."""
    with cluster.lock:
        index = cluster.index
        names = index.node_names() if node is None else [node]
        return [index.inventory(name) for name in names if name in index]


def stored_pods(sessions: Sessions, node: str | None = None) -> dict[str, store.StoredPod]:
    with sessions() as session:
        return store.assignments(session, node=node)


def reserved_since(sessions: Sessions) -> list[datetime]:
    """When each pod still waiting for its Binding was reserved (for the alerts)."""
    with sessions() as session:
        return store.reserved_since(session)


def live_reports(
    cluster: ClusterState, sessions: Sessions, node: str | None = None
) -> tuple[list[NodeReport], dict[str, store.StoredPod]]:
    """Reports of a running extender: nodes from the index, pods from the store."""
    inventories = index_inventories(cluster, node)
    if node is not None and not inventories:
        return [], {}
    pods = stored_pods(sessions, node)
    return build_reports(inventories, pods, label=cluster.vendors.share_label), pods


def stored_reports(
    sessions: Sessions, node: str | None = None
) -> tuple[list[NodeReport], dict[str, store.StoredPod]]:
    """Reports straight from the store, with no extender running."""
    with sessions() as session:
        inventories = store.load_inventories(session, names=None if node is None else [node])
        pods = store.assignments(session, node=node)
    return build_reports(inventories, pods), pods
