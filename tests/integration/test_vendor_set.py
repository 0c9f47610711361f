"""Several vendors in one process: NVIDIA GPUs and the test suite's Widget accelerators.

A node may carry devices of both; one container may ask for both (HAMi allows it). The
node fits only if every vendor's part fits, the bind writes each vendor's annotations over
its own devices only, and an extender started afresh rebuilds the pod's allocation from
both vendors' annotations. kube-scheduler's calls go over real HTTP; the Kubernetes side
is the test API server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.apiserver import FakeApiServer
from tests.support.server import args, bind_args, node_json, pod_json, serve, standalone_settings
from tests.support.waiting import eventually
from tests.support.widget_vendor import COUNT, MEMORY, WidgetVendor
from vgpu_extender.api import create_app
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.vendors import VendorSet
from vgpu_extender.vendors.nvidia import NvidiaVendor

MIXED = "mixed"
GPU_ONLY = "gpu-only"
NVIDIA_ALLOCATED = "hami.io/vgpu-devices-allocated"


def _vendors() -> VendorSet:
    return VendorSet((NvidiaVendor(), WidgetVendor()))


def _mixed_node() -> dict[str, Any]:
    node = node_json(MIXED, gpus=1, mem=16000)
    widgets = [{"id": f"{MIXED}-w{i}", "count": 2, "mem": 8000} for i in range(2)]
    node["metadata"]["annotations"][WidgetVendor.inventory_annotation] = json.dumps(widgets)
    return node


def _both(name: str, *, gpu_mem: int, widget_mem: int) -> dict[str, Any]:
    """A pod whose one container asks for a GPU share and a widget share."""
    pod = pod_json(name, gpus=1, mem=gpu_mem)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    limits.update({COUNT: "1", MEMORY: str(widget_mem)})
    return pod


def _grants(running: Any, uid: str) -> list[tuple[str, str, int]]:
    allocation = running.runtime.cluster.index.allocation(uid)
    assert allocation is not None
    return sorted(
        (g.vendor, g.uuid, g.memory_mib)
        for grants in allocation.assignment.containers
        for g in grants
    )


def test_a_container_asking_two_vendors_fits_binds_and_is_rebuilt_from_both_annotations(
    apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    apiserver.add_node(_mixed_node())
    apiserver.add_node(node_json(GPU_ONLY, gpus=2, mem=16000))
    pod = apiserver.add_pod(_both("both", gpu_mem=4000, widget_mem=6000))
    settings = standalone_settings(tmp_path)
    running = serve(create_app(settings, kube=real_kube, vendor=_vendors()))
    try:
        index = running.runtime.cluster.index
        eventually(lambda: MIXED in index and GPU_ONLY in index, "both nodes listed")
        # The GPU-only node has GPUs to spare but no widget: the widget part fails there.
        answer = running.verb("/filter", args(pod, [MIXED, GPU_ONLY]))
        assert answer["NodeNames"] == [MIXED]
        assert answer["FailedAndUnresolvableNodes"][GPU_ONLY].startswith("no devices")
        # Too much widget memory fails the mixed node too, by the widget's memory stage;
        # a pod of two vendors reads the words for any device (no "gpumem" for a widget).
        greedy = _both("greedy", gpu_mem=4000, widget_mem=9000)
        answer = running.verb("/filter", args(greedy, [MIXED]))
        assert answer["FailedAndUnresolvableNodes"][MIXED] == (
            "insufficient device memory: need 9000 MiB, best free 8000 MiB"
        )

        assert running.verb("/bind", bind_args(pod, MIXED)) == {"Error": ""}
        held = _grants(running, "uid-both")
        assert [(vendor, memory) for vendor, _uuid, memory in held] == [
            ("NVIDIA", 4000),
            ("WIDGET", 6000),
        ]
        annotations = apiserver.get_pod("default", "both")["metadata"]["annotations"]
        # Each vendor writes its own devices only, in its own encoding.
        gpu_part, widget_part = held[0][1], held[1][1]
        assert gpu_part in annotations[NVIDIA_ALLOCATED]
        assert widget_part not in annotations[NVIDIA_ALLOCATED]
        assert annotations[WidgetVendor.assignment_annotation] == f"{widget_part}:6000"
        assert annotations[WidgetVendor.node_annotation] == MIXED
        assert annotations["hami.io/vgpu-node"] == MIXED

        # A GPU-only pod on the mixed node takes the GPU, never a widget.
        gpu_pod = apiserver.add_pod(pod_json("gpu", gpus=1, mem=2000))
        assert running.verb("/bind", bind_args(gpu_pod, MIXED)) == {"Error": ""}
        assert [vendor for vendor, *_ in _grants(running, "uid-gpu")] == ["NVIDIA"]
    finally:
        running.stop()

    # A fresh extender with an empty store learns both pods from their annotations.
    (tmp_path / "fresh").mkdir()
    fresh = serve(
        create_app(standalone_settings(tmp_path / "fresh"), kube=real_kube, vendor=_vendors())
    )
    try:
        index = fresh.runtime.cluster.index
        eventually(lambda: index.allocation("uid-both") is not None, "the bound pod imported")
        assert _grants(fresh, "uid-both") == held
        # The widgets still hold 6000 of 16000 MiB after the import: a second 6000 fits
        # the other widget, a third does not fit any.
        second = apiserver.add_pod(_both("second", gpu_mem=1000, widget_mem=6000))
        assert fresh.verb("/bind", bind_args(second, MIXED)) == {"Error": ""}
        third = _both("third", gpu_mem=1000, widget_mem=6000)
        answer = fresh.verb("/filter", args(third, [MIXED]))
        assert answer["FailedNodes"][MIXED].startswith("insufficient device memory")
    finally:
        fresh.stop()
