"""A mixed cluster of NVIDIA GPUs and Huawei Ascend NPUs, scheduled through the real app.

The extender runs with ``VGPU_VENDOR=nvidia,ascend`` (the registry builds NVIDIA and one
vendor per Ascend chip); the nodes carry the annotations HAMi's device plugins write
(``hami.io/node-nvidia-register``; ``hami.io/node-register-<CW>`` with ``NetworkID`` and
``hami-vnpu-core``); kube-scheduler's filter, prioritize and bind go over real HTTP, and
the Kubernetes side is the project's test API server driven by the real client.

Nodes: ``gpu`` (2 GPUs), ``b3-split`` and ``b3-whole`` (eight 910B3 NPUs in two rings of
four, template vNPUs), ``b3-core`` (eight 910B3 in soft split, ``hami-vnpu-core: true``),
``p310`` (four 310P cards) and ``mixed`` (one GPU and two 310P cards).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    args,
    bind_args,
    node_json,
    pod_json,
    serve,
    standalone_settings,
)
from tests.support.waiting import eventually
from vgpu_extender.api import create_app
from vgpu_extender.domain import Device, Reason
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.vendors import VendorSet, create_vendor_set
from vgpu_extender.vendors.ascend import AscendChipVendor
from vgpu_extender.vendors.ascend.inventory_codec import MODE_HAMI_CORE, MODE_VNPU, network_id


def _chip(word: str) -> AscendChipVendor:
    vendor = create_vendor_set("ascend").get(word)
    assert isinstance(vendor, AscendChipVendor)
    return vendor


B3 = _chip("Ascend910B3")
P310 = _chip("Ascend310P")
NODES = ["gpu", "b3-split", "b3-whole", "b3-core", "p310", "mixed"]


def _chips(vendor: AscendChipVendor, node: str, n: int, *, core: bool) -> list[Device]:
    chip = vendor.chip
    return [
        Device(
            uuid=f"{node}-npu{i}",
            index=i,
            count=chip.slots,
            memory_mib=chip.memory_allocatable,
            cores=100 if core else chip.ai_core,
            type=vendor.name,
            mode=MODE_HAMI_CORE if core else MODE_VNPU,
            vendor=vendor.name,
            custom_info=()
            if network_id(vendor.name, i) is None
            else (("NetworkID", network_id(vendor.name, i) or 0),),
        )
        for i in range(n)
    ]


def _npu_node(
    name: str, vendor: AscendChipVendor, n: int, *, core: bool = False, gpus: int = 0
) -> dict[str, Any]:
    node = node_json(name, gpus=gpus) if gpus else node_json(name)
    annotations = node["metadata"]["annotations"]
    if not gpus:
        del annotations["hami.io/node-nvidia-register"]
    annotations[vendor.inventory_annotation] = vendor.encode_inventory(
        _chips(vendor, name, n, core=core)
    )
    annotations["hami-vnpu-core"] = "true" if core else "false"
    node["status"]["allocatable"][vendor.chip.resource_name] = str(n * vendor.chip.slots)
    return node


def _npu_pod(
    name: str,
    vendor: AscendChipVendor,
    count: int,
    memory: int | None,
    *,
    cores: int | None = None,
    core_mode: bool = False,
    gpus: int | None = None,
) -> dict[str, Any]:
    pod = pod_json(name, gpus=gpus)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    chip = vendor.chip
    limits[chip.resource_name] = str(count)
    if memory is not None:
        limits[chip.resource_memory_name] = str(memory)
    if cores is not None:
        limits[chip.resource_core_name] = str(cores)
    if core_mode:
        pod["metadata"]["annotations"] = {"huawei.com/vnpu-mode": "hami-core"}
    return pod


def _feasible(running: RunningExtender, pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    answer = running.verb("/filter", args(pod, NODES))
    failed = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    return answer["NodeNames"], failed


def _bind(
    running: RunningExtender, apiserver: FakeApiServer, pod: dict[str, Any], node: str
) -> Any:
    apiserver.add_pod(pod)
    assert running.verb("/bind", bind_args(pod, node)) == {"Error": ""}
    allocation = running.runtime.cluster.index.allocation(pod["metadata"]["uid"])
    assert allocation is not None
    return allocation.assignment


def _devices_of(running: RunningExtender, uuids: list[str]) -> list[Device]:
    index = running.runtime.cluster.index
    found = []
    for uuid in uuids:
        where = index.locate(uuid)
        assert where is not None, uuid
        found.append(index.devices(where[0])[where[1]])
    return found


def _grants(containers: Any) -> list[list[tuple[str, str, int, int]]]:
    """Per container, its grants as sortable tuples (the order within one is the choice's)."""
    return [sorted((g.vendor, g.uuid, g.memory_mib, g.cores) for g in c) for c in containers]


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json("gpu", gpus=2))
    apiserver.add_node(_npu_node("b3-split", B3, 8))
    apiserver.add_node(_npu_node("b3-whole", B3, 8))
    apiserver.add_node(_npu_node("b3-core", B3, 8, core=True))
    apiserver.add_node(_npu_node("p310", P310, 4))
    apiserver.add_node(_npu_node("mixed", P310, 2, gpus=1))
    return apiserver


def _start(tmp_path: Path, real_kube: RealKubeClient) -> RunningExtender:
    settings = standalone_settings(tmp_path, vendor="nvidia,ascend")
    running = serve(create_app(settings, kube=real_kube))
    index = running.runtime.cluster.index
    eventually(lambda: all(name in index for name in NODES), "every node listed")
    return running


def test_a_mixed_cluster_places_every_kind_of_pod_where_it_belongs(
    cluster: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    running = _start(tmp_path, real_kube)
    words = B3.wording
    try:
        assert isinstance(running.runtime.cluster.vendors, VendorSet)
        # A template vNPU (vir05_1c_16g): any 910B3 node, a hard-split one or (the pod has
        # no mode of its own) the soft-split one; not the GPU or 310P nodes.
        vnpu = _npu_pod("vnpu", B3, 1, 16384)
        feasible, failed = _feasible(running, vnpu)
        assert sorted(feasible) == ["b3-core", "b3-split", "b3-whole"]
        assert set(failed) == {"gpu", "p310", "mixed"}
        assert failed["gpu"].startswith(words.text(Reason.NO_DEVICES))
        scores = running.verb("/prioritize", args(vnpu, feasible))
        assert set(s["Host"] for s in scores) <= set(feasible)  # a host scored 0 left out
        assert all(0 < s["Score"] <= 10 for s in scores)
        assignment = _bind(running, cluster, vnpu, "b3-split")
        (grant,) = assignment.containers[0]
        assert (grant.vendor, grant.memory_mib, grant.cores) == ("Ascend910B3", 16384, 0)
        annotations = cluster.get_pod("default", "vnpu")["metadata"]["annotations"]
        assert annotations["hami.io/Ascend910B3-devices-allocated"] == (
            f"{grant.uuid},Ascend910B3,16384,0:;"
        )
        assert annotations["hami.io/Ascend910B3-devices-to-allocate"] == (
            f"{grant.uuid},Ascend910B3,16384,0:;"
        )
        assert annotations["huawei.com/Ascend910B3"] == (
            f'[{{"UUID":"{grant.uuid}","temp":"vir05_1c_16g","memory":16384}}]'
        )
        assert annotations["hami.io/vgpu-node"] == "b3-split"
        assert annotations["hami.io/bind-phase"] == "allocating"

        # Soft split: only the hami-core node; the others are refused for their mode.
        soft = _npu_pod("soft", B3, 1, 8192, cores=30, core_mode=True)
        feasible, failed = _feasible(running, soft)
        assert feasible == ["b3-core"]
        assert failed["b3-split"].startswith(words.text(Reason.MODE_MISMATCH))
        assignment = _bind(running, cluster, soft, "b3-core")
        (grant,) = assignment.containers[0]
        annotations = cluster.get_pod("default", "soft")["metadata"]["annotations"]
        assert annotations["huawei.com/Ascend910B3"] == (
            f'[{{"UUID":"{grant.uuid}","memory":8192,"core":30}}]'
        )

        # A 4-chip job stays in one ring (HCCS), beside the vNPU already there.
        ring = _npu_pod("ring", B3, 4, 65536)
        assignment = _bind(running, cluster, ring, "b3-split")
        uuids = [g.uuid for g in assignment.containers[0]]
        assert len(set(uuids)) == 4
        rings = {d.custom("NetworkID") for d in _devices_of(running, uuids)}
        assert len(rings) == 1
        # The whole node: only the untouched hard-split node can hold 8 whole cards.
        node_job = _npu_pod("node-job", B3, 8, 65536)
        feasible, failed = _feasible(running, node_job)
        assert feasible == ["b3-whole"]
        assert failed["b3-split"].startswith(words.text(Reason.MEMORY))
        assignment = _bind(running, cluster, node_job, "b3-whole")
        assert len(assignment.containers[0]) == 8
        feasible, failed = _feasible(running, _npu_pod("late", B3, 1, 16384))
        assert "b3-whole" not in feasible

        # 310P: its own cards only; template memory as the webhook rounded it.
        small = _npu_pod("small", P310, 1, 6144)
        feasible, _failed = _feasible(running, small)
        assert sorted(feasible) == ["mixed", "p310"]
        # NVIDIA pods never land on NPU-only nodes.
        feasible, failed = _feasible(running, pod_json("cuda", gpus=1, mem=4000))
        assert sorted(feasible) == ["gpu", "mixed"]
        # One container asking a GPU and a 310P card: the one node with both.
        both = _npu_pod("both", P310, 1, 6144, gpus=1)
        feasible, _failed = _feasible(running, both)
        assert feasible == ["mixed"]
        assignment = _bind(running, cluster, both, "mixed")
        assert sorted(g.vendor for g in assignment.containers[0]) == ["Ascend310P", "NVIDIA"]
        annotations = cluster.get_pod("default", "both")["metadata"]["annotations"]
        assert "Ascend310P" in annotations["hami.io/Ascend310P-devices-allocated"]
        assert "Ascend310P" not in annotations["hami.io/vgpu-devices-allocated"]

        # The admin API shows the NPUs beside the GPUs, with their vendor and shares.
        by_name = {n["name"]: n for n in running.client.get("/api/v1/nodes?devices=true").json()}
        split_devices = by_name["b3-split"]["devices"]
        assert {d["vendor"] for d in split_devices} == {"Ascend910B3"}
        assert sum(d["memory_used_mib"] for d in split_devices) == 16384 + 4 * 65536
        assert {d["vendor"] for d in by_name["mixed"]["devices"]} == {"NVIDIA", "Ascend310P"}
        # Each share is named as the vendor names it: the template vNPU, a whole card none.
        labels = {(p["name"], p["label"]) for d in split_devices for p in d["pods"]}
        assert labels == {("vnpu", "vir05_1c_16g"), ("ring", "")}

        # Nothing is over-allocated in any dimension.
        cols = running.runtime.cluster.index.cols
        for free, total in (
            (cols.slots_free, cols.slots_total),
            (cols.mem_free, cols.mem_total),
            (cols.cores_free, cols.cores_total),
        ):
            assert (free[cols.valid] >= 0).all() and (free <= total).all()
        held = {
            a.pod_uid: _grants(a.assignment.containers)
            for a in running.runtime.cluster.index.allocations()
        }
    finally:
        running.stop()

    # Every pod's annotations decode to what the store held: a fresh extender with an
    # empty store imports each from them alone.
    (tmp_path / "fresh").mkdir()
    fresh = _start(tmp_path / "fresh", real_kube)
    try:
        index = fresh.runtime.cluster.index
        eventually(lambda: all(index.allocation(uid) for uid in held), "every pod imported")
        for uid, grants in held.items():
            imported = index.allocation(uid)
            assert imported is not None
            assert _grants(imported.assignment.containers) == grants, uid
    finally:
        fresh.stop()
