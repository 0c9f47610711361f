"""The rows of HAMi's allocation gauges, node by node, for ``metrics.AllocationGauges``.

Devices, their usage and every pod's grants come from the index, as filter sees them;
a pod's namespace and name only the store knows, so they are read from it once per pod
and kept with the node while the pod stays there. The index's lock is taken for a
chunk of nodes at a time: a first scrape at 10,000 nodes reads them all, and the verbs
wait for the lock at most one chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from vgpu_extender import store
from vgpu_extender.domain import Device
from vgpu_extender.engine import Allocation
from vgpu_extender.metrics import DeviceRow, GrantRow, NodeGauges
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.store_health import StoreHealth

#: Nodes read under one hold of the index's lock.
CHUNK = 256

PodName = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class _NodeRead:
    """One node as read under the lock: nothing here changes once read."""

    node: str
    stamp: int
    devices: tuple[Device, ...]
    memory_used: list[int]
    cores_used: list[int]
    shared: list[int]
    pods: list[Allocation]


class IndexGaugeRows:
    """``metrics.NodeGaugeSource`` over a running extender's index and store."""

    def __init__(
        self, cluster: ClusterState, sessions: store.Sessions, health: StoreHealth
    ) -> None:
        self._cluster = cluster
        self._sessions = sessions
        self._health = health
        #: Per node, the names of the pods on it when it was last read.
        self._names: dict[str, dict[str, PodName]] = {}

    def stamps(self) -> list[tuple[str, int]]:
        with self._cluster.lock:
            index = self._cluster.index
            stamps = index.row_stamps.tolist()
            row_of = index.row_of
            pairs = [
                (name, stamps[row])
                for name in index.node_names()
                if (row := row_of(name)) is not None
            ]
        pairs.sort()
        if len(self._names) > len(pairs):  # nodes gone: forget their pods
            live = {name for name, _ in pairs}
            self._names = {n: pods for n, pods in self._names.items() if n in live}
        return pairs

    def nodes(self, names: Sequence[str]) -> Iterator[NodeGauges]:
        reads = [
            read
            for start in range(0, len(names), CHUNK)
            for read in self._read(names[start : start + CHUNK])
        ]
        found = self._pod_names(reads)
        for read in reads:
            yield self._gauges(read, found)

    # ----------------------------------------------------------------- reading
    def _read(self, names: Sequence[str]) -> list[_NodeRead]:
        reads: list[_NodeRead] = []
        with self._cluster.lock:
            index = self._cluster.index
            cols = index.cols
            stamps = index.row_stamps
            for name in names:
                row = index.row_of(name)
                if row is None:
                    continue  # gone since its stamp was read
                devices = index.devices(row)
                slots = slice(0, len(devices))
                reads.append(
                    _NodeRead(
                        node=name,
                        stamp=int(stamps[row]),
                        devices=devices,
                        memory_used=(
                            cols.mem_total[row, slots] - cols.mem_free[row, slots]
                        ).tolist(),
                        cores_used=(
                            cols.cores_total[row, slots] - cols.cores_free[row, slots]
                        ).tolist(),
                        shared=(
                            cols.slots_total[row, slots] - cols.slots_free[row, slots]
                        ).tolist(),
                        pods=index.pods_on(name),
                    )
                )
        return reads

    def _pod_names(self, reads: Iterable[_NodeRead]) -> dict[str, PodName]:
        """Names of the pods not named before, from the store; those it could not read
        (none while it is out of reach) wait for a later scrape."""
        unknown = [
            pod.pod_uid
            for read in reads
            for pod in read.pods
            if pod.pod_uid not in self._names.get(read.node, {})
        ]
        if not unknown or not self._health.available:
            return {}
        found: dict[str, PodName] = {}
        try:
            # A transaction per read: on SQLite even a read holds the write lock, and a
            # first scrape at 10,000 nodes names 66,000 pods.
            for start in range(0, len(unknown), store.NAMES_PER_READ):
                with self._sessions() as session:
                    found.update(
                        store.pod_names(session, unknown[start : start + store.NAMES_PER_READ])
                    )
        except store.FAILURES as exc:
            self._health.report(exc, where="metrics: pods' names (their gauges left out)")
        return found

    def _gauges(self, read: _NodeRead, found: dict[str, PodName]) -> NodeGauges:
        devices = [
            DeviceRow(
                node=read.node,
                uuid=dev.uuid,
                index=dev.index,
                type=dev.type,
                memory_mib=dev.memory_mib,
                cores=dev.cores,
                memory_used_mib=read.memory_used[slot],
                cores_used=read.cores_used[slot],
                shared=read.shared[slot],
            )
            for slot, dev in enumerate(read.devices)
        ]
        before = self._names.get(read.node, {})
        named: dict[str, PodName] = {}
        grants: list[GrantRow] = []
        for pod in read.pods:
            name = before.get(pod.pod_uid) or found.get(pod.pod_uid)
            if name is None:
                continue
            named[pod.pod_uid] = name
            namespace, pod_name = name
            for position, container in enumerate(pod.assignment.containers):
                grants.extend(
                    GrantRow(
                        namespace=namespace,
                        node=read.node,
                        pod=pod_name,
                        container_index=position,
                        device_uuid=grant.uuid,
                        memory_mib=grant.memory_mib,
                        cores=grant.cores,
                    )
                    for grant in container
                )
        self._names[read.node] = named
        return NodeGauges(
            node=read.node,
            stamp=read.stamp,
            devices=devices,
            grants=grants,
            complete=len(named) == len(read.pods),
        )
