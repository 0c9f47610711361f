"""Every vendor in one cluster, scheduled through the real app over HTTP.

The extender serves every vendor of the registry (``VGPU_VENDOR`` lists them all); the
test Kubernetes API server holds a node of each vendor word as its device plugin leaves
it (tests/support/mixed_vendors.py). For each vendor, kube-scheduler's filter, prioritize
and bind place a shared and a whole ask on the vendor's node and nowhere else, pods fill
the node until the next is refused with a reason, the bind's annotations decode (the
vendor's ``decode_assignment``) to the store's rows, and a fresh extender with an empty
store imports every pod from those annotations alone. The webhook, called once per
vendor entry of deploy/'s components, mutates a pod of every vendor as it does once.
Each bind takes the vendor's node lock as HAMi does; the test gives it back as the
vendor's device plugin would.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.support.apiserver import FakeApiServer
from tests.support.json_patch import json_patch
from tests.support.mixed_vendors import ALL_VENDORS, Ask, Kind, kinds, node_of, pod_of
from tests.support.server import (
    RunningExtender,
    args,
    bind_args,
    serve,
    standalone_settings,
    start_extender,
)
from tests.support.waiting import eventually
from vgpu_extender.api import create_app
from vgpu_extender.kube import LOCK_ANNOTATION
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services.bind_locks import vendor_lock
from vgpu_extender.vendors import Vendor, VendorSet, create_vendor_set
from vgpu_extender.vendors.registry import VENDORS as VENDOR_NAMES
from vgpu_extender.vendors.registry import create_vendors

VENDORS = create_vendor_set(ALL_VENDORS)
KINDS = kinds(VENDORS)
NODES = [kind.node for kind in KINDS]
#: Every node lock a bind of these vendors may take.
LOCK_KEYS = {key for key in map(vendor_lock, VENDORS.members) if key is not None}

#: (container index, device, memory, cores) of each of a pod's grants.
Grants = set[tuple[int, str, int, int]]


def _vendor(word: str) -> Vendor:
    vendor = VENDORS.get(word)
    assert vendor is not None
    return vendor


def _start(tmp_path: Path, kube: RealKubeClient) -> RunningExtender:
    settings = standalone_settings(tmp_path, vendor=ALL_VENDORS, hami_node_lock=True)
    running = serve(create_app(settings, kube=kube))
    index = running.runtime.cluster.index
    eventually(lambda: all(name in index for name in NODES), "every node listed")
    return running


def _filter(running: RunningExtender, pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    answer = running.verb("/filter", args(pod, NODES))
    failed = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    return answer["NodeNames"], failed


def _place(
    running: RunningExtender, apiserver: FakeApiServer, kind: Kind, name: str, ask: Ask
) -> Grants:
    """filter, prioritize and bind as kube-scheduler does; the pod's grants, as the store
    holds them, once the bind annotations decode to the same."""
    return _place_pod(running, apiserver, kind, pod_of(name, ask))


def _place_pod(
    running: RunningExtender, apiserver: FakeApiServer, kind: Kind, pod: dict[str, Any]
) -> Grants:
    name = pod["metadata"]["name"]
    feasible, failed = _filter(running, pod)
    assert feasible == [kind.node], (name, failed.get(kind.node))
    assert set(failed) == set(NODES) - {kind.node}
    assert all(failed.values())
    scores = running.verb("/prioritize", args(pod, feasible))
    assert {s["Host"] for s in scores} <= set(feasible)
    apiserver.add_pod(pod)
    assert running.verb("/bind", bind_args(pod, kind.node)) == {"Error": ""}
    rows = {
        (r.container_index, r.device_uuid, r.memory_mib, r.cores)
        for r in running.live_rows(pod["metadata"]["uid"])
    }
    assert rows, name
    vendor = _vendor(kind.word)
    annotations = apiserver.get_pod("default", name)["metadata"]["annotations"]
    assert annotations[vendor.node_annotation] == kind.node
    decoded = vendor.decode_assignment(annotations[vendor.assignment_annotation])
    assert {
        (i, g.uuid, g.memory_mib, g.cores) for i, grants in enumerate(decoded) for g in grants
    } == rows, name
    assert {g.vendor for grants in decoded for g in grants} == {kind.word}
    _check_lock(apiserver, kind, vendor, name)
    return rows


def _check_lock(apiserver: FakeApiServer, kind: Kind, vendor: Vendor, pod: str) -> None:
    """The bind took the vendor's node lock (HAMi's shared one, the vendor's own, or
    none), and nothing else; then the vendor's device plugin gives it back after
    kubelet's Allocate, as it would."""
    annotations = apiserver.get_node(kind.node)["metadata"].get("annotations", {})
    held = {key: value for key, value in annotations.items() if key in LOCK_KEYS}
    key = vendor_lock(vendor)
    assert set(held) == ({key} if key else set()), (pod, held)
    if key == LOCK_ANNOTATION:
        assert held[key].endswith(f",default,{pod}")
    if key is not None:
        apiserver.cluster.patch("nodes", "", kind.node, {"metadata": {"annotations": {key: None}}})


def _devices_of(running: RunningExtender, node: str) -> set[str]:
    index = running.runtime.cluster.index
    row = index.row_of(node)
    assert row is not None
    return {device.uuid for device in index.devices(row)}


def _check_kind(running: RunningExtender, apiserver: FakeApiServer, kind: Kind) -> None:
    on_node = _devices_of(running, kind.node)
    assert on_node
    tag = kind.node
    placed: list[Grants] = []
    if kind.shared is not None:
        shared = _place(running, apiserver, kind, f"{tag}-shared", kind.shared)
        placed.append(shared)
    if kind.whole is not None:
        whole = _place(running, apiserver, kind, f"{tag}-whole", kind.whole)
        placed.append(whole)
        if kind.shared is not None:
            # A whole ask never shares a device with the shared one.
            assert not {g[1] for g in whole} & {g[1] for g in placed[0]}
    for i in range(kind.fills):
        placed.append(_place(running, apiserver, kind, f"{tag}-fill{i}", kind.fill))
    assert all({g[1] for g in grants} <= on_node for grants in placed)
    # Full: the next pod is refused, with the vendor's reason.
    feasible, failed = _filter(running, pod_of(f"{tag}-late", kind.fill))
    assert kind.node not in feasible
    assert failed[kind.node], tag


def _no_over_allocation(running: RunningExtender) -> None:
    cols = running.runtime.cluster.index.cols
    for free, total in (
        (cols.slots_free, cols.slots_total),
        (cols.mem_free, cols.mem_total),
        (cols.cores_free, cols.cores_total),
    ):
        assert (free[cols.valid] >= 0).all() and (free <= total).all()


def _held(running: RunningExtender) -> dict[str, Grants]:
    return {
        a.pod_uid: {
            (i, g.uuid, g.memory_mib, g.cores)
            for i, grants in enumerate(a.assignment.containers)
            for g in grants
        }
        for a in running.runtime.cluster.index.allocations()
    }


def test_every_vendor_in_one_cluster(
    apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    for kind in KINDS:
        apiserver.add_node(node_of(kind))
    running = _start(tmp_path, real_kube)
    try:
        vendors = running.runtime.cluster.vendors
        assert isinstance(vendors, VendorSet)
        # Every member of every vendor has a node here, and every node's devices are its.
        served = {m.name for m in vendors.members}
        assert {kind.word for kind in KINDS} <= served
        for name in VENDOR_NAMES:
            words = {m.name for m in create_vendors(name)}
            assert words & {kind.word for kind in KINDS}, f"no node of vendor {name}"
        for kind in KINDS:
            index = running.runtime.cluster.index
            row = index.row_of(kind.node)
            assert row is not None
            assert {d.vendor for d in index.devices(row)} == {kind.word}, kind.node
        for kind in KINDS:
            _check_kind(running, apiserver, kind)
        _no_over_allocation(running)
        # The admin API shows each node's devices under its vendor, with the pods on them.
        listed = running.client.get("/api/v1/nodes?devices=true").json()
        by_name = {n["name"]: n for n in listed}
        for kind in KINDS:
            devices = by_name[kind.node]["devices"]
            assert {d["vendor"] for d in devices} == {kind.word}
            assert any(d["pods"] for d in devices), kind.node
        held = _held(running)
    finally:
        running.stop()
    assert len(held) == sum((k.shared is not None) + (k.whole is not None) + k.fills for k in KINDS)

    # The annotations alone are enough: a fresh extender on an empty store imports each pod.
    (tmp_path / "fresh").mkdir()
    fresh = _start(tmp_path / "fresh", real_kube)
    try:
        index = fresh.runtime.cluster.index
        eventually(lambda: all(index.allocation(uid) for uid in held), "every pod imported")
        assert _held(fresh) == held
        _no_over_allocation(fresh)
    finally:
        fresh.stop()


def _admitted(running: RunningExtender, pod: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The pod as the API server keeps it after the webhook's answer, and how many
    changes the answer made (RFC 6902 ``add``, the only operation the webhook emits)."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }
    response = running.client.post("/webhook", json=review).json()["response"]
    assert response["allowed"] is True, response
    operations = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    assert all(op["op"] == "add" for op in operations), operations  # the only one it emits
    return json_patch(pod, operations), len(operations)


def test_a_pod_of_every_vendor_admitted_once_per_webhook_entry(tmp_path: Path) -> None:
    # deploy/'s components add one webhook entry per vendor: a pod asking for several
    # vendors' resources is admitted once per entry, the second time as the first left it.
    running = start_extender(standalone_settings(tmp_path, vendor=ALL_VENDORS))
    try:
        asks = [kind.shared or kind.whole for kind in KINDS]
        # Asks the webhook rewrites: several Moore Threads GPUs, several Iluvatar chips.
        asks += [Ask({"mthreads.com/vgpu": "2"}), Ask({"iluvatar.ai/BI-V150-vgpu": "2"})]
        pod = pod_of("every-vendor", Ask({}))
        del pod["spec"]["schedulerName"]
        pod["spec"]["containers"] = [
            {"name": f"c{i}", "image": "x", "resources": {"limits": dict(ask.limits)}}
            for i, ask in enumerate(a for a in asks if a is not None)
        ]
        once, changes = _admitted(running, pod)
        assert once["spec"]["schedulerName"] == "vgpu-scheduler"
        assert changes > 1
        twice, again = _admitted(running, once)
        assert (twice, again) == (once, 0)
    finally:
        running.stop()


def _pod_of_containers(name: str, asks: list[Ask]) -> dict[str, Any]:
    pod = pod_of(name, asks[0])
    pod["spec"]["containers"] = [
        {"name": f"c{i}", "resources": {"limits": dict(ask.limits)}} for i, ask in enumerate(asks)
    ]
    return pod


def test_rules_over_a_pods_containers(
    apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    for kind in KINDS:
        apiserver.add_node(node_of(kind))
    by_word = {kind.word: kind for kind in KINDS}
    running = _start(tmp_path, real_kube)
    try:
        # The device policy spreads a pod's containers over two free GPUs...
        nvidia = by_word["NVIDIA"]
        assert nvidia.shared is not None
        pod = _pod_of_containers("nv-pair", [nvidia.shared, nvidia.shared])
        assert len({r[1] for r in _place_pod(running, apiserver, nvidia, pod)}) == 2
        # ...but Moore Threads puts every container of a pod on one device (HAMi's
        # customFilterRule).
        mthreads = by_word["Mthreads"]
        assert mthreads.shared is not None
        pod = _pod_of_containers("mt-pair", [mthreads.shared, mthreads.shared])
        rows = _place_pod(running, apiserver, mthreads, pod)
        assert {r[0] for r in rows} == {0, 1}
        assert len({r[1] for r in rows}) == 1
        # MetaX whole GPUs: a pod's containers spread over the cards.
        metax = by_word["Metax-GPU"]
        assert metax.whole is not None
        pod = _pod_of_containers("mx-pair", [metax.whole, metax.whole])
        rows = _place_pod(running, apiserver, metax, pod)
        assert {r[0] for r in rows} == {0, 1}
        assert len({r[1] for r in rows}) == 2
        _no_over_allocation(running)
    finally:
        running.stop()
