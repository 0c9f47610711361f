"""Two extender processes sharing PostgreSQL bind 500 pods onto 5 nodes at once.

Capacity is 160 pods (5 nodes x 4 GPUs x 8 shares of 3000 MiB in 24576 MiB), so most
binds must be refused, and both processes race for the same devices the whole time.
Afterwards no device is over-allocated, exactly the capacity is bound, and every
bound pod's annotations say what the store says.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    ExtenderProcess,
    bind_args,
    node_json,
    pod_json,
    spawn_extender,
    write_kubeconfig,
)
from tests.support.waiting import eventually
from vgpu_extender import store
from vgpu_extender.vendors import create_vendor

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

NODES = [f"gpu-{i}" for i in range(5)]
GPUS, GPU_MEM, POD_MEM, PODS = 4, 24576, 3000, 500
CAPACITY = len(NODES) * GPUS * (GPU_MEM // POD_MEM)


@pytest.fixture
def processes(
    apiserver: FakeApiServer, fresh_postgres: str, tmp_path: Path
) -> Iterator[list[ExtenderProcess]]:
    for name in NODES:
        apiserver.add_node(node_json(name, gpus=GPUS, mem=GPU_MEM))
    store.migrate(fresh_postgres)  # once, so the two starts do not race on the schema
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", apiserver.url)
    env = {"VGPU_DATABASE_URL": fresh_postgres, "VGPU_KUBECONFIG": str(kubeconfig)}
    started: list[ExtenderProcess] = []
    try:
        for i in range(2):
            started.append(spawn_extender(env=env, log=tmp_path / f"extender-{i}.log", wait=False))
        for process in started:
            process.wait_ready()
        yield started
    finally:
        for process in started:
            process.stop()


def test_two_replicas_never_over_allocate(
    apiserver: FakeApiServer, processes: list[ExtenderProcess], fresh_postgres: str
) -> None:
    pods = [apiserver.add_pod(pod_json(f"p{i:03d}", mem=POD_MEM, cores=5)) for i in range(PODS)]

    def bind(i: int) -> str:
        replica = processes[i % 2]
        response = replica.post("/bind", bind_args(pods[i], NODES[i % len(NODES)]))
        assert response.status_code == 200
        error: str = response.json()["Error"]
        return error

    with ThreadPoolExecutor(max_workers=8) as pool:
        errors = list(pool.map(bind, range(PODS)))

    succeeded = {pods[i]["metadata"]["uid"] for i, e in enumerate(errors) if not e}
    assert len(succeeded) == CAPACITY, Counter(e.split(":")[-1] for e in errors if e)

    engine = store.make_engine(fresh_postgres)
    try:
        sessions = store.session_factory(engine)

        def all_bound() -> bool:  # rows are marked bound in the background after a bind
            with sessions() as session:
                return all(r.state == "bound" for r in store.live_allocations(session))

        eventually(all_bound, "every bound pod's rows marked bound")
        with sessions() as session:
            rows = store.live_allocations(session)
            devices = {
                d.uuid: d
                for inventory in store.load_inventories(session)
                for d in inventory.devices
            }
    finally:
        engine.dispose()

    # No device over-allocated: memory, cores and shares within what it has.
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        used[row.device_uuid][0] += row.memory_mib
        used[row.device_uuid][1] += row.cores
        used[row.device_uuid][2] += 1
    for device_uuid, (memory, cores, shares) in used.items():
        device = devices[device_uuid]
        assert memory <= device.memory_mib and cores <= device.cores
        assert shares <= device.count

    # Every bound pod is in the store, bound, exactly as its annotations say; no other is.
    vendor = create_vendor("nvidia")
    by_pod: dict[str, list[store.Allocation]] = defaultdict(list)
    for row in rows:
        by_pod[row.pod_uid].append(row)
    assert set(by_pod) == succeeded
    for pod in pods:
        stored = apiserver.get_pod("default", pod["metadata"]["name"])
        uid = stored["metadata"]["uid"]
        node = stored["spec"].get("nodeName")
        if uid not in succeeded:
            assert node is None
            continue
        annotations = stored["metadata"]["annotations"]
        [[grant]] = vendor.decode_assignment(annotations["hami.io/vgpu-devices-allocated"])
        [row] = by_pod[uid]
        assert row.state == store.AllocationState.BOUND
        assert (row.node, row.device_uuid, row.memory_mib, row.cores) == (
            node,
            grant.uuid,
            grant.memory_mib,
            grant.cores,
        )
        assert annotations["hami.io/vgpu-node"] == node
    assert len(apiserver.bindings) == CAPACITY


MUTEX = {"hami.io/gpu-scheduler-policy": "mutex"}


def test_two_replicas_give_mutex_pods_devices_no_other_pod_holds(
    apiserver: FakeApiServer, processes: list[ExtenderProcess], fresh_postgres: str
) -> None:
    # Each replica's index lags behind the other's binds: the store's re-check at
    # commit is what keeps two mutex pods off one device.
    count = 5 * len(NODES) * GPUS
    pods = [
        apiserver.add_pod(pod_json(f"m{i:03d}", mem=POD_MEM, cores=5, annotations=MUTEX))
        for i in range(count)
    ]

    def bind(i: int) -> str:
        response = processes[i % 2].post("/bind", bind_args(pods[i], NODES[i % len(NODES)]))
        assert response.status_code == 200
        error: str = response.json()["Error"]
        return error

    with ThreadPoolExecutor(max_workers=8) as pool:
        errors = list(pool.map(bind, range(count)))

    engine = store.make_engine(fresh_postgres)
    try:
        with store.session_factory(engine)() as session:
            rows = store.live_allocations(session)
    finally:
        engine.dispose()
    holders: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        holders[row.device_uuid].add(row.pod_uid)
    assert {uuid: len(uids) for uuid, uids in holders.items() if len(uids) > 1} == {}
    # Every device went to one mutex pod, and only the binds beyond that were refused.
    assert len(holders) == len(NODES) * GPUS
    assert sum(1 for e in errors if not e) == len(NODES) * GPUS
