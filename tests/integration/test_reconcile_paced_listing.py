"""The periodic pass paces its listings: its bursts and pauses reach into the decoding
of every page of nodes and pods (a page is otherwise one call the verbs wait for)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.support.apiserver import FakeApiServer
from tests.support.server import node_json, pod_json
from vgpu_extender.kube import real
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services import sync as sync_module
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.pacing import Pacer
from vgpu_extender.services.sync import SyncService
from vgpu_extender.vendors import create_vendor_set

NODES = 9
PODS = 23


class _Listing:
    """Which list the real client is in, if any (its list methods wrapped)."""

    def __init__(self) -> None:
        self.kind = ""


def test_the_periodic_pass_ticks_its_pacer_for_every_listed_object(
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(real, "LIST_PAGE", 4)  # several pages of each
    for i in range(NODES):
        apiserver.add_node(node_json(f"gpu-{i}", gpus=2))
    for i in range(PODS):
        apiserver.add_pod(pod_json(f"pod-{i}"))
    cluster = ClusterState(vendor=create_vendor_set("nvidia"))
    service = SyncService(
        cluster=cluster,
        sessions=sessions,
        inventory=InventoryService(cluster=cluster, sessions=sessions, split_count=10),
        kube=real_kube,
        reservation_ttl=timedelta(minutes=5),
        interval_s=3600.0,
    )
    listing = _Listing()
    ticks: dict[str, int] = {}

    class CountingPacer(Pacer):
        def tick(self) -> None:
            if listing.kind:
                ticks[listing.kind] = ticks.get(listing.kind, 0) + 1
            super().tick()

    def listed(kind: str, method: Any) -> Any:
        def wrapper(**kwargs: Any) -> Any:
            listing.kind = kind
            try:
                return method(**kwargs)
            finally:
                listing.kind = ""

        return wrapper

    monkeypatch.setattr(sync_module, "Pacer", CountingPacer)
    monkeypatch.setattr(
        real_kube, "list_nodes_with_version", listed("nodes", real_kube.list_nodes_with_version)
    )
    monkeypatch.setattr(
        real_kube, "list_pods_with_version", listed("pods", real_kube.list_pods_with_version)
    )

    service.resync(nodes=True)

    assert ticks == {"nodes": NODES, "pods": PODS}
