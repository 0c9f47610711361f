"""A vendor is a folder and one registry line: one defined only here is scheduled, bound
and released through the real app over HTTP.

``Widget`` accelerators have two dimensions (allocation slots and memory), their own
resource names (``example.com/widget``, ``example.com/widget-mem``) and their own
annotations (``tests.support.widget_vendor``). Nothing outside the test suite knows them:
the app is built with the vendor
(``create_app(vendor=...)``, as the registry would build it), the node registers them
through the test API server, and kube-scheduler's calls go over real HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.apiserver import FakeApiServer
from tests.support.server import args, bind_args, serve, standalone_settings
from tests.support.waiting import eventually
from tests.support.widget_vendor import COUNT, MEMORY, NODE, WIDGET_SHARE, WidgetVendor
from vgpu_extender.api import create_app
from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    Device,
    DeviceGrant,
    DeviceUsage,
    PodAssignment,
    Reason,
)
from vgpu_extender.domain.share import ShareModel, ShareModels
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.store.capacity import find_misfit
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE


def _widget_pod(name: str, memory: int) -> dict[str, Any]:
    limits = {COUNT: "1", MEMORY: str(memory)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": limits, "requests": limits}}],
            "schedulerName": "vgpu-scheduler",
        },
        "status": {"phase": "Pending"},
    }


def _node(name: str) -> dict[str, Any]:
    devices = [{"id": f"{name}-w{i}", "count": 2, "mem": 8000} for i in range(2)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {},
            "annotations": {WidgetVendor.inventory_annotation: json.dumps(devices)},
        },
        "status": {"allocatable": {COUNT: "4"}},
    }


def _used_memory(client: httpx.Client) -> int:
    (node,) = client.get("/api/v1/nodes").json()
    return int(node["memory_used_mib"])


def test_a_vendor_defined_here_is_scheduled_bound_and_released_over_http(
    apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Any
) -> None:
    apiserver.add_node(_node(NODE))
    pod = apiserver.add_pod(_widget_pod("small", 6000))
    app = create_app(standalone_settings(tmp_path), kube=real_kube, vendor=WidgetVendor())
    running = serve(app)
    try:
        eventually(lambda: NODE in running.runtime.cluster.index, "the node watch's first list")
        # Filter: the widget pod fits; one asking more memory than a widget has does not,
        # with the share model's memory stage and its numbers.
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
        huge = _widget_pod("huge", 9000)
        answer = running.verb("/filter", args(huge, [NODE]))
        reason = answer["FailedAndUnresolvableNodes"][NODE]
        assert reason == "insufficient device memory: need 9000 MiB, best free 8000 MiB"
        # Bind: the Binding carries the vendor's own annotations.
        assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
        annotations = apiserver.get_pod("default", "small")["metadata"]["annotations"]
        assert annotations[WidgetVendor.node_annotation] == NODE
        assert annotations[WidgetVendor.assignment_annotation] in (
            f"{NODE}-w0:6000",
            f"{NODE}-w1:6000",
        )
        assert not any(key.startswith("hami.io/") for key in annotations)
        assert _used_memory(running.client) == 6000
        # A second pod of 6000 MiB takes the other widget; a third finds no room.
        second = apiserver.add_pod(_widget_pod("second", 6000))
        assert running.verb("/bind", bind_args(second, NODE)) == {"Error": ""}
        third = _widget_pod("third", 6000)
        answer = running.verb("/filter", args(third, [NODE]))
        assert answer["FailedNodes"][NODE].startswith(NEUTRAL_WORDING.text(Reason.MEMORY))
        assert NODE not in answer["FailedAndUnresolvableNodes"]  # preemption could help
        # Release: the pod is deleted, the watch gives its devices back.
        apiserver.delete_pod("default", "small")
        eventually(
            lambda: running.runtime.cluster.index.allocation("uid-small") is None,
            "the deleted pod's devices released",
        )
        assert _used_memory(running.client) == 6000
        assert running.verb("/filter", args(third, [NODE]))["NodeNames"] == [NODE]
    finally:
        running.stop()


def test_the_store_rechecks_a_bind_by_the_vendors_own_table() -> None:
    """The bind-time re-check evaluates the Widget's stages and words: memory over the
    widget's is refused, and a widget's zero cores are no reason (NVIDIA's table would
    refuse a zero-core grant on a device with no cores left)."""
    devices = {"w0": Device("w0", count=2, memory_mib=8000, cores=0, vendor="WIDGET")}
    committed = {"w0": DeviceUsage(memory_mib=6000, cores=0, slots=1)}

    def misfit(memory: int, share: ShareModel) -> Any:
        grant = DeviceGrant("w0", memory, 0, "WIDGET")
        return find_misfit(
            node="n",
            devices=devices,
            cordoned=frozenset(),
            committed=committed,
            assignment=PodAssignment("n", ((grant,),)),
            shares=ShareModels.one(share),
        )

    refused = misfit(3000, WIDGET_SHARE)
    assert refused is not None and refused.reason is Reason.MEMORY
    assert refused.message == "device w0 on n over-allocated: memory 9000/8000"
    assert misfit(2000, WIDGET_SHARE) is None
    assert misfit(2000, NVIDIA_SHARE).reason is Reason.NO_COMPUTE
