"""A reconcile pass racing what happens meanwhile: the service stopping (the pass stops
before its next pod, ``stop`` returns only once it has, and the store is not written
after) and pods going (a pod the watch saw deleted is not imported again from the
older listing the pass works from)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.support.apiserver import FakeApiServer
from tests.support.server import node_json, pod_json
from tests.support.waiting import eventually
from vgpu_extender import store
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.sync import SyncService
from vgpu_extender.vendors import create_vendor_set

NODE = "gpu-0"
GPUS = 8
PER_GPU = 3
#: Each import is held this long, so that the stop comes in the middle of the pass.
IMPORT_DELAY_S = 0.05


def _placed(name: str, gpu: int) -> dict[str, Any]:
    """A running pod HAMi placed on ``gpu`` of the node: only a reconcile imports it."""
    return pod_json(
        name,
        mem=1000,
        node=NODE,
        annotations={
            "hami.io/vgpu-node": NODE,
            "hami.io/vgpu-devices-allocated": f"GPU-{NODE}-{gpu},NVIDIA,1000,0:;",
            "hami.io/vgpu-devices-to-allocate": "",
            "hami.io/bind-phase": "success",
        },
    ) | {"status": {"phase": "Running"}}


def _stored(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return sum(1 for _meta in store.pod_states(session))


def _sync(
    kube: RealKubeClient, sessions: sessionmaker[Session]
) -> tuple[SyncService, ClusterState, InventoryService]:
    cluster = ClusterState(vendor=create_vendor_set("nvidia"))
    inventory = InventoryService(cluster=cluster, sessions=sessions, split_count=10)
    sync = SyncService(
        cluster=cluster,
        sessions=sessions,
        inventory=inventory,
        kube=kube,
        reservation_ttl=timedelta(minutes=5),
        interval_s=3600.0,
    )
    return sync, cluster, inventory


def test_a_stop_during_the_first_sync_ends_its_reconcile_before_the_next_pod(
    apiserver: FakeApiServer, real_kube: RealKubeClient, sessions: sessionmaker[Session]
) -> None:
    apiserver.add_node(node_json(NODE, gpus=GPUS))
    total = GPUS * PER_GPU
    for i in range(total):
        apiserver.add_pod(_placed(f"placed-{i:02d}", i % GPUS))
    sync, _cluster, inventory = _sync(real_kube, sessions)
    imported: list[str] = []
    importing = threading.Event()
    real_import = sync._import

    def slow_import(pod: Any, report: Any) -> None:
        importing.set()
        time.sleep(IMPORT_DELAY_S)
        real_import(pod, report)
        imported.append(pod["metadata"]["name"])

    sync._import = slow_import  # type: ignore[method-assign]
    sync.start()
    try:
        assert importing.wait(10.0), "the first sync imported nothing"
        eventually(lambda: len(imported) >= 3, "a few pods imported")
    finally:
        sync.stop()
        inventory.stop()
    after_stop = _stored(sessions)
    time.sleep(5 * IMPORT_DELAY_S)

    assert _stored(sessions) == after_stop  # nothing written once stop returned
    assert after_stop == len(imported) < total  # the pass stopped part way
    assert not sync.synced  # a pass cut short does not count as the first sync


@pytest.mark.parametrize("how", ["deleted", "finished"])
def test_a_pod_the_watch_saw_go_is_not_imported_again_from_an_older_listing(
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
    sessions: sessionmaker[Session],
    how: str,
) -> None:
    apiserver.add_node(node_json(NODE, gpus=GPUS))
    apiserver.add_pod(_placed("leaving", 0))
    apiserver.add_pod(_placed("staying", 1))
    sync, cluster, inventory = _sync(real_kube, sessions)
    sync.start()
    try:
        eventually(lambda: sync.synced, "the first sync done")
        assert _stored(sessions) == 2
        listed_at = datetime.now(UTC)
        stale = real_kube.list_pods_with_version()  # a pass's listing, taken before...
        if how == "deleted":
            apiserver.delete_pod("default", "leaving")  # ...the pod goes
        else:
            apiserver.set_pod_phase("default", "leaving", "Succeeded")
        eventually(lambda: _stored(sessions) == 1, "the watch released the pod")

        sync.reconcile(stale.items, listed_at=listed_at)

        assert _stored(sessions) == 1
        with cluster.lock:
            assert cluster.index.allocation("uid-leaving") is None
            assert cluster.index.allocation("uid-staying") is not None
    finally:
        sync.stop()
        inventory.stop()
