"""The vendors of one process as one: which a pod asks for, and what each reads and writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.widget_vendor import COUNT, MEMORY, WidgetVendor
from vgpu_extender.domain import (
    NEUTRAL_WORDING,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts, VendorSet
from vgpu_extender.vendors.nvidia import NvidiaVendor
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

NVIDIA = NvidiaVendor()
WIDGET = WidgetVendor()
BOTH = VendorSet((NVIDIA, WIDGET))


def _pod(*containers: dict[str, str], annotations: dict[str, str] | None = None) -> Any:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "annotations": annotations},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "containers": [
                {"name": f"c{i}", "resources": {"limits": limits}}
                for i, limits in enumerate(containers)
            ],
        },
    }


def test_a_set_of_one_answers_as_its_vendor() -> None:
    one = VendorSet((NVIDIA,))
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})
    assert one.parse_pod(pod) == NVIDIA.parse_pod(pod)
    assert VendorSet.of(one) is one
    assert VendorSet.of(NVIDIA).members == (NVIDIA,)


def test_asks_are_tagged_with_their_vendor_and_merged_container_by_container() -> None:
    pod = _pod(
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", COUNT: "2", MEMORY: "500"},
        {},
        {COUNT: "1", MEMORY: "300"},
    )
    request = BOTH.parse_pod(pod)
    init, both, empty, widget = request.containers
    assert (init.vendor, init.count, init.init, init.also) == ("NVIDIA", 1, True, ())
    assert (both.vendor, both.count, both.memory_mib) == ("NVIDIA", 1, 1000)
    assert [(a.vendor, a.count, a.memory_mib) for a in both.also] == [("WIDGET", 2, 500)]
    assert not empty.wants_devices and empty.name == "c1"
    assert (widget.vendor, widget.name, widget.count) == ("WIDGET", "c2", 1)
    assert request.vendors == ("NVIDIA", "WIDGET")
    assert [a.vendor for a in request.device_containers] == ["NVIDIA", "NVIDIA", "WIDGET", "WIDGET"]


def test_a_pod_of_one_vendor_keeps_that_vendors_request_and_words() -> None:
    request = BOTH.parse_pod(_pod({COUNT: "1", MEMORY: "300"}))
    assert request.vendors == ("NVIDIA", "WIDGET")  # the init container asks for a GPU
    widget_pod = {"name": "m", "resources": {"limits": {COUNT: "1"}}}
    only_widget = BOTH.parse_pod({"metadata": {"uid": "w"}, "spec": {"containers": [widget_pod]}})
    assert only_widget.vendors == ("WIDGET",)
    assert BOTH.wording_for(only_widget) is NEUTRAL_WORDING  # the widget's own words
    gpu_only = BOTH.parse_pod(_pod({"nvidia.com/gpu": "1"}))
    assert BOTH.wording_for(gpu_only) is NVIDIA_WORDING
    # Two vendors: words for any device, so no vendor's name is said of another's failure.
    assert BOTH.wording_for(request) is NEUTRAL_WORDING


def test_a_selector_judges_only_its_own_vendors_devices() -> None:
    pod = _pod(
        {"nvidia.com/gpu": "1", COUNT: "1"},
        annotations={"nvidia.com/use-gputype": "A100"},
    )
    request = BOTH.parse_pod(pod)
    assert request.selector.vendor == "NVIDIA"
    assert request.selector.judges("NVIDIA") and not request.selector.judges("WIDGET")


def test_selectors_of_two_vendors_in_one_pod_are_refused_by_name() -> None:
    class Choosy(WidgetVendor):
        def parse_pod(self, pod: Any) -> Any:
            from dataclasses import replace

            from vgpu_extender.domain import DeviceSelector

            request = super().parse_pod(pod)
            return replace(request, selector=DeviceSelector(use_uuids=("w0",)))

    choosy = VendorSet((NVIDIA, Choosy()))
    pod = _pod({"nvidia.com/gpu": "1", COUNT: "1"}, annotations={"nvidia.com/use-gpuuuid": "G"})
    with pytest.raises(RequestError, match="device selectors of several vendors"):
        choosy.parse_pod(pod)


def test_bind_annotations_give_each_vendor_its_own_grants() -> None:
    assignment = PodAssignment(
        "n",
        ((DeviceGrant("GPU-0", 1000, 10, "NVIDIA"), DeviceGrant("w0", 500, 0, "WIDGET")),),
    )
    annotations = BOTH.bind_annotations(assignment, bind_time=7)
    assert annotations[WIDGET.assignment_annotation] == "w0:500"
    assert "w0" not in annotations[NVIDIA.assignment_annotation]
    assert "GPU-0" in annotations[NVIDIA.assignment_annotation]
    gpu_only = PodAssignment("n", ((DeviceGrant("GPU-0", 1000, 10, "NVIDIA"),),))
    assert WIDGET.assignment_annotation not in BOTH.bind_annotations(gpu_only, bind_time=7)
    # Read back: both annotations merge position by position.
    merged = BOTH.decode_assignments(annotations, init=(False,))
    assert merged is not None
    assert sorted(g.uuid for g in merged[0]) == ["GPU-0", "w0"]
    assert BOTH.decode_assignments({}, init=(False,)) is None


def test_a_node_lists_every_vendors_devices_and_names_the_one_at_fault() -> None:
    widgets = json.dumps([{"id": "w0", "count": 2, "mem": 8000}])
    annotations = {WIDGET.inventory_annotation: widgets}
    devices = BOTH.decode_node(NodeFacts("node-a", annotations=annotations))
    assert devices is not None and [d.vendor for d in devices] == ["WIDGET"]
    assert BOTH.decode_node(NodeFacts("node-a", annotations={})) is None
    with pytest.raises(InventoryError, match=r"^WIDGET: widget inventory"):
        BOTH.decode_node(NodeFacts("node-a", annotations={WIDGET.inventory_annotation: "not json"}))
    # One vendor alone raises its own error unchanged.
    with pytest.raises(InventoryError, match=r"^widget inventory"):
        VendorSet((WIDGET,)).decode_node(
            NodeFacts("node-a", annotations={WIDGET.inventory_annotation: "not json"})
        )


def test_cordons_are_read_from_every_vendors_key_once() -> None:
    annotations = {NVIDIA.cordon_annotation: "GPU-1", WIDGET.cordon_annotation: "w1,w2"}
    assert BOTH.decode_cordons(annotations) == {"GPU-1", "w1", "w2"}
    assert BOTH.cordon_keys() == (NVIDIA.cordon_annotation, WIDGET.cordon_annotation)
    assert WIDGET.inventory_annotation in BOTH.node_keys()


def test_a_set_refuses_no_vendor_and_a_word_listed_twice() -> None:
    with pytest.raises(ValueError, match="at least one vendor"):
        VendorSet(())
    with pytest.raises(ValueError, match="'NVIDIA' is listed twice"):
        VendorSet((NVIDIA, NvidiaVendor()))


def test_a_node_with_two_ascend_chips_lists_both_as_their_own_vendors() -> None:
    from vgpu_extender.vendors import create_vendor_set

    chips = create_vendor_set("ascend")
    b3, p310 = chips.get("Ascend910B3"), chips.get("Ascend310P")
    assert b3 is not None and p310 is not None
    annotations = {
        b3.inventory_annotation: json.dumps(
            [{"id": "b3-0", "count": 4, "devmem": 65536, "devcore": 20, "health": True}]
        ),
        p310.inventory_annotation: json.dumps(
            [{"id": "p-0", "count": 7, "devmem": 21527, "devcore": 8, "health": True}]
        ),
        "hami-vnpu-core": "false",
    }
    devices = chips.decode_node(NodeFacts("node-a", annotations=annotations))
    assert devices is not None
    assert sorted((d.uuid, d.vendor) for d in devices) == [
        ("b3-0", "Ascend910B3"),
        ("p-0", "Ascend310P"),
    ]


def test_a_vendor_read_from_node_capacity_gets_its_devices_through_the_inventory() -> None:
    """Cambricon's MLUs are in the node's ``status.capacity`` (HAMi reads them so), with
    ids made from the node's name: the node's inventory gets them from the capacity the
    Node object carries, and its change is a change of inventory."""
    from vgpu_extender.services.inventory import NodeView, node_inventory
    from vgpu_extender.vendors import create_vendor_set

    vendors = create_vendor_set("nvidia,cambricon")
    capacity = {"cambricon.com/mlu.smlu.vcore": "200", "cambricon.com/mlu.smlu.vmemory": "256"}
    assert vendors.capacity_keys() == tuple(capacity)
    view = NodeView(name="mlu-node", capacity=capacity)
    inventory = node_inventory(view, vendors, previous=None, split_count=10)
    assert inventory is not None and not inventory.problem
    # 200 vcores: two MLUs; 256 units of 256 MiB over them: 32768 MiB each.
    assert [(d.uuid, d.vendor, d.memory_mib) for d in inventory.devices] == [
        ("mlu-node-cambricon-mlu-0", "MLU", 32768),
        ("mlu-node-cambricon-mlu-1", "MLU", 32768),
    ]
    # A node without the capacity has no inventory of this vendor.
    assert node_inventory(NodeView(name="n"), vendors, previous=None, split_count=10) is None


def test_a_bad_annotation_of_a_vendor_the_pod_does_not_ask_for_refuses_nothing() -> None:
    """An NPU-only pod carrying a malformed NVIDIA annotation is read for its NPUs; a pod
    asking for GPUs with it is refused, naming the annotation."""
    from vgpu_extender.vendors import create_vendor_set

    vendors = create_vendor_set("ascend,nvidia")
    limits = {"huawei.com/Ascend910B3": "1"}
    pod = {
        "metadata": {"uid": "u", "annotations": {"nvidia.com/numa-bind": "maybe"}},
        "spec": {"containers": [{"name": "m", "resources": {"limits": limits}}]},
    }
    assert vendors.parse_pod(pod).vendors == ("Ascend910B3",)
    limits["nvidia.com/gpu"] = "1"
    with pytest.raises(RequestError, match="numa-bind"):
        vendors.parse_pod(pod)


def test_numa_binding_survives_the_merge_whichever_vendor_is_first() -> None:
    from vgpu_extender.vendors import create_vendor_set

    vendors = create_vendor_set("ascend,nvidia")
    limits = {"huawei.com/Ascend910B3": "1", "nvidia.com/gpu": "2"}
    pod = {
        "metadata": {"uid": "u", "annotations": {"nvidia.com/numa-bind": "true"}},
        "spec": {"containers": [{"name": "m", "resources": {"limits": limits}}]},
    }
    assert vendors.parse_pod(pod).numa_bind


def test_a_node_capacity_of_millions_of_devices_is_refused_before_any_is_made() -> None:
    from vgpu_extender.vendors import create_vendor_set

    vendors = create_vendor_set("nvidia,metax")
    with pytest.raises(InventoryError, match="more than the 256 one node may have"):
        vendors.decode_node(NodeFacts("n", capacity={"metax-tech.com/gpu": "2147483647"}))
    cambricon = create_vendor_set("nvidia,cambricon")
    huge = {"cambricon.com/mlu.smlu.vcore": str(10**12), "cambricon.com/mlu.smlu.vmemory": "1"}
    with pytest.raises(InventoryError, match="more than the 256"):
        cambricon.decode_node(NodeFacts("n", capacity=huge))
