"""After bind: the watches and reconcile keep the store and the index true to the cluster."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    pod_json,
    standalone_settings,
)
from tests.support.waiting import eventually, until_bound
from vgpu_extender import store
from vgpu_extender.domain import DeviceGrant, NodeInventory, PodAssignment
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services.inventory import NodeView, node_inventory
from vgpu_extender.vendors import create_vendor

NODE = "gpu-1"
DEVICE = f"GPU-{NODE}-0"


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    return apiserver


def _bound(cluster: FakeApiServer, running: RunningExtender, name: str) -> dict[str, Any]:
    pod = cluster.add_pod(pod_json(name, mem=4000))
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    return pod


@pytest.mark.parametrize(
    "finish",
    [
        lambda c: c.delete_pod("default", "web"),
        lambda c: c.set_pod_phase("default", "web", "Succeeded"),
        lambda c: c.set_pod_phase("default", "web", "Failed"),
    ],
    ids=["deleted", "succeeded", "failed"],
)
def test_finished_pods_give_their_devices_back(
    extender: StartExtender,
    cluster: FakeApiServer,
    real_kube: RealKubeClient,
    finish: Callable[[FakeApiServer], object],
) -> None:
    running = extender(kube=real_kube)
    pod = _bound(cluster, running, "web")
    uid = pod["metadata"]["uid"]
    assert running.runtime.cluster.index.allocation(uid) is not None
    finish(cluster)
    eventually(lambda: running.runtime.cluster.index.allocation(uid) is None, "index release")
    assert running.live_rows(uid) == []


def _annotated(name: str, value: str, *, node: str | None = NODE) -> dict[str, Any]:
    return pod_json(
        name,
        mem=3000,
        node=node,
        annotations={
            "hami.io/vgpu-node": NODE,
            "hami.io/vgpu-devices-allocated": value,
            "hami.io/vgpu-devices-to-allocate": "",
            "hami.io/bind-phase": "success",
        },
    )


def test_bound_pods_with_hami_annotations_are_imported(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    before = cluster.add_pod(_annotated("before", f"{DEVICE},NVIDIA,3000,0:;"))
    cluster.add_pod(_annotated("pending", f"{DEVICE},NVIDIA,3000,0:;", node=None))
    running = extender(kube=real_kube)
    held = running.runtime.cluster.index.allocation(before["metadata"]["uid"])
    assert held is not None
    assert held.assignment.containers == ((DeviceGrant(DEVICE, 3000, 0),),)
    assert [r.state for r in running.live_rows(before["metadata"]["uid"])] == ["bound"]
    # An annotated pod not bound yet is a bind in progress, not a fact to import.
    assert running.runtime.cluster.index.allocation("uid-pending") is None
    # Pods that appear later are imported by the watch.
    later = cluster.add_pod(_annotated("later", f"GPU-{NODE}-1,NVIDIA,3000,0:;"))
    eventually(
        lambda: running.runtime.cluster.index.allocation(later["metadata"]["uid"]) is not None,
        "import by the pod watch",
    )
    answer = running.verb("/filter", args(pod_json("big", mem=14000), [NODE]))
    assert answer["FailedNodes"] == {
        NODE: "insufficient gpumem: need 14000 MiB, best free 13384 MiB"
    }


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        (
            {"hami.io/node-nvidia-register": None},
            "no usable device inventory: annotation hami.io/node-nvidia-register missing",
        ),
        (
            {"hami.io/node-nvidia-register": "GPU-x,10"},
            "no usable device inventory: annotation hami.io/node-nvidia-register unreadable",
        ),
        (
            {"hami.io/node-nvidia-register": "[]"},
            "no usable device inventory: annotation hami.io/node-nvidia-register lists no devices",
        ),
        (
            {
                "hami.io/node-nvidia-register": (
                    f'[{{"id":"{DEVICE}","count":10,"devmem":16384,"devcore":100,'
                    '"type":"NVIDIA-Tesla T4"}]'
                )
            },
            "unhealthy devices",
        ),
    ],
    ids=["removed", "unparsable", "empty", "unhealthy"],
)
def test_a_node_whose_inventory_turns_bad_stops_taking_pods(
    extender: StartExtender,
    cluster: FakeApiServer,
    real_kube: RealKubeClient,
    annotations: dict[str, str | None],
    reason: str,
) -> None:
    running = extender(kube=real_kube)
    pod = _bound(cluster, running, "web")
    cluster.cluster.patch("nodes", "", NODE, {"metadata": {"annotations": annotations}})
    probe = args(pod_json("next", mem=1000), [NODE])

    def rejected() -> bool:
        return NODE in running.verb("/filter", probe)["FailedAndUnresolvableNodes"]

    eventually(rejected, "the node watch applied the change")
    assert running.verb("/filter", probe)["FailedAndUnresolvableNodes"][NODE].startswith(reason)
    # Pods already there keep their devices.
    assert running.runtime.cluster.index.allocation(pod["metadata"]["uid"]) is not None


def _reserve(tmp_path: Path, pod: dict[str, Any], device: str = DEVICE) -> None:
    """A reservation as a crashed process would have left it."""
    settings = standalone_settings(tmp_path)
    engine = store.make_engine(settings.database_url)
    try:
        store.migrate(engine)
        vendor = create_vendor("nvidia")
        inventory = node_inventory(
            NodeView(
                NODE, annotations=node_json(NODE, gpus=2, mem=16384)["metadata"]["annotations"]
            ),
            vendor,
            previous=None,
            split_count=10,
        )
        assert isinstance(inventory, NodeInventory)
        with store.session_factory(engine).begin() as session:
            store.upsert_node(session, inventory=inventory, source="annotation")
            store.reserve(
                session,
                pod_uid=pod["metadata"]["uid"],
                namespace="default",
                name=pod["metadata"]["name"],
                assignment=PodAssignment(NODE, ((DeviceGrant(device, 3000, 0),),)),
                now=datetime.now(UTC),
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("pod_node", "present", "expected_state", "counter"),
    [
        (NODE, True, "bound", "marked_bound"),
        (None, True, None, "expired"),
        (None, False, None, "released_gone"),
        ("gpu-other", True, None, "released_moved"),
    ],
    ids=["bound-meanwhile", "never-bound", "pod-gone", "bound-elsewhere"],
)
def test_reconcile_on_start_settles_reservations_left_by_a_crash(
    extender: StartExtender,
    cluster: FakeApiServer,
    real_kube: RealKubeClient,
    tmp_path: Path,
    pod_node: str | None,
    present: bool,
    expected_state: str | None,
    counter: str,
) -> None:
    pod = pod_json("web", mem=3000, node=pod_node)
    if present:
        cluster.add_pod(pod)
    _reserve(tmp_path, pod)
    running = extender(kube=real_kube, reservation_ttl_s=0)
    rows = running.live_rows(pod["metadata"]["uid"])
    assert [r.state for r in rows] == ([expected_state] if expected_state else [])
    sync = running.runtime.sync
    assert sync is not None and getattr(sync.totals, counter) == 1
    assert sync.totals.changes == 1
    held = running.runtime.cluster.index.allocation(pod["metadata"]["uid"])
    assert (held is not None) == (expected_state is not None)


def test_a_young_reservation_is_left_to_its_bind(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=3000))
    running = extender(kube=real_kube, reservation_ttl_s=3600)
    # Made since this process started (another replica's bind in flight): a pass leaves
    # it alone until the TTL. (One made before start is settled at once: see
    # test_startup_reservations.)
    _reserve(tmp_path, pod)
    sync = running.runtime.sync
    assert sync is not None
    sync.reconcile(real_kube.list_pods_with_version().items, listed_at=datetime.now(UTC))
    assert [r.state for r in running.live_rows(pod["metadata"]["uid"])] == ["reserved"]
    running.runtime.cluster.refresh_node(running.runtime.sessions, NODE)
    # The scheduler's retry of that bind drops the old reservation and binds.
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    until_bound(running, pod["metadata"]["uid"])


@pytest.mark.parametrize(
    "register",
    [
        '[{"id":"GPU-L-0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-T4","health":true}]',
        "GPU-L-0,10,16384,100,NVIDIA-T4,0,true:",
        "GPU-L-0,10,16384,100,NVIDIA-T4,0,true,0,hami-core:",
    ],
    ids=["json", "legacy-7-fields", "legacy-9-fields"],
)
def test_inventory_is_read_in_both_annotation_forms(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient, register: str
) -> None:
    apiserver.add_node(node_json("legacy", register=register))
    running = extender(kube=real_kube)
    answer = running.verb("/filter", args(pod_json("p", mem=16000), ["legacy"]))
    assert answer["NodeNames"] == ["legacy"]
    [device] = running.runtime.cluster.index.inventory("legacy").devices
    assert (device.uuid, device.memory_mib, device.count, device.healthy) == (
        "GPU-L-0",
        16384,
        10,
        True,
    )
