"""A vendor is a folder and one registry line: one defined only here is scheduled, bound
and released through the real app over HTTP.

``Widget`` accelerators have two dimensions (allocation slots and memory), their own
resource names (``example.com/widget``, ``example.com/widget-mem``) and their own
annotations. Nothing outside this file knows them: the app is built with the vendor
(``create_app(vendor=...)``, as the registry would build it), the node registers them
through the test API server, and kube-scheduler's calls go over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from tests.support.apiserver import FakeApiServer
from tests.support.server import args, bind_args, serve, standalone_settings
from tests.support.waiting import eventually
from vgpu_extender.api import create_app
from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    ContainerRequest,
    Device,
    DeviceGrant,
    DeviceUsage,
    InventoryError,
    PodAssignment,
    PodRequest,
    Reason,
    RequestError,
)
from vgpu_extender.domain.share import (
    Capacity,
    HeldShare,
    ShareDemand,
    ShareModel,
    ShareModels,
    Stage,
)
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.store.capacity import find_misfit
from vgpu_extender.vendors import AdmissionNames
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

COUNT = "example.com/widget"
MEMORY = "example.com/widget-mem"
PREFIX = "example.com/widget-"
NODE = "widget-node"


# ----------------------------------------------------------------- the share model
def _has_slot(free: Capacity, total: Capacity, demand: ShareDemand) -> object:
    return free.slots >= demand.slots


def _has_memory(free: Capacity, total: Capacity, demand: ShareDemand) -> object:
    return free.memory >= demand.memory_on(total.memory)


def _over(what: str) -> Any:
    def text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
        return f"{where} over-allocated: {what} {getattr(used, what)}/{getattr(total, what)}"

    return text


WIDGET_SHARE = ShareModel(
    name="WIDGET",
    stages=(
        Stage(Reason.SLOTS, _has_slot, _over("slots")),
        Stage(Reason.MEMORY, _has_memory, _over("memory"), measure="memory"),
    ),
    consumed=lambda total, demand: Capacity(demand.slots, demand.memory_on(total.memory), 0),
    held=lambda usage: HeldShare(usage.slots, usage.memory_mib, usage.cores, exclusive=False),
)


# ----------------------------------------------------------------- the vendor
class WidgetVendor:
    """The Vendor protocol for Widget accelerators: resource names, codecs, annotations."""

    name = "WIDGET"
    share = WIDGET_SHARE
    #: No words of its own: the reasons read as for any device.
    wording = NEUTRAL_WORDING
    admission = AdmissionNames(count=COUNT, memory=MEMORY, exclusive_cores="0")
    resource_names = frozenset({COUNT, MEMORY})
    inventory_annotation = PREFIX + "register"
    cordon_annotation = PREFIX + "cordon"
    node_annotation = PREFIX + "node"
    assignment_annotation = PREFIX + "devices"

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        containers: list[ContainerRequest] = []
        for init, key in ((True, "initContainers"), (False, "containers")):
            for container in spec.get(key) or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                try:
                    count, memory = int(limits.get(COUNT, 0)), int(limits.get(MEMORY, 0))
                except ValueError as exc:
                    raise RequestError(f"{container.get('name')}: {exc}") from exc
                containers.append(ContainerRequest(container["name"], count, memory, init=init))
        return PodRequest(
            uid=meta.get("uid", ""),
            namespace=meta.get("namespace", "default"),
            name=meta.get("name", ""),
            containers=tuple(containers),
        )

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        try:
            items = json.loads(value)
            return tuple(
                Device(
                    uuid=item["id"],
                    index=i,
                    count=item["count"],
                    memory_mib=item["mem"],
                    cores=0,
                    type="WIDGET",
                    vendor=self.name,
                )
                for i, item in enumerate(items)
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InventoryError(f"widget inventory: {exc}") from exc

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        return json.dumps([{"id": d.uuid, "count": d.count, "mem": d.memory_mib} for d in devices])

    def decode_cordon(self, value: str) -> frozenset[str]:
        return frozenset(part for part in value.split(",") if part)

    def encode_assignment(self, assignment: PodAssignment) -> str:
        return ";".join(
            ",".join(f"{g.uuid}:{g.memory_mib}" for g in grants) for grants in assignment.containers
        )

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        containers = tuple(
            tuple(
                DeviceGrant(uuid, int(memory), 0, self.name)
                for uuid, memory in (grant.split(":") for grant in segment.split(",") if grant)
            )
            for segment in value.split(";")
        )
        return containers[: len(init)] if init else containers

    def bind_annotations(self, assignment: PodAssignment, *, bind_time: int) -> dict[str, str]:
        return {
            self.node_annotation: assignment.node,
            self.assignment_annotation: self.encode_assignment(assignment),
            PREFIX + "bind-time": str(bind_time),
        }


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
