"""Devices in an allocation conflict take no new pod, as cordoned ones, with their own reason."""

from __future__ import annotations

from tests.support.builders import make_index, make_node, make_request
from vgpu_extender.domain import PodAssignment, Reason
from vgpu_extender.engine import choose_devices, fit
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING


def test_a_conflicted_device_is_refused_to_new_pods_with_its_reason() -> None:
    index = make_index(make_node("a", 2))
    two = make_request(2)
    one = make_request(1)
    assert fit(index, two, ["a"]).rejections == {}
    index.set_conflicted("a", ["a-gpu0"])
    rejection = fit(index, two, ["a"]).rejections["a"]
    assert rejection.reason is Reason.CONFLICTED
    assert rejection.unresolvable
    assert rejection.message(NVIDIA_WORDING) == "conflicted devices: need 2, have 1"
    # The other device still takes a pod, and the device choice never picks the refused one.
    assert fit(index, one, ["a"]).rejections == {}
    chosen = choose_devices(index, one, "a")
    assert isinstance(chosen, PodAssignment)
    assert [g.uuid for grants in chosen.containers for g in grants] == ["a-gpu1"]
    index.set_conflicted("a", [])
    assert fit(index, two, ["a"]).rejections == {}


def test_conflicts_outlive_an_inventory_update_and_are_kept_apart_from_cordons() -> None:
    index = make_index(make_node("a", 2))
    index.set_conflicted("a", ["a-gpu0", "unknown-gpu"])
    assert index.conflicted("a") == frozenset({"a-gpu0"})
    index.upsert_node(make_node("a", 2, cordoned=[1]))
    assert index.conflicted("a") == frozenset({"a-gpu0"})
    # The cordon leaves one device of two, the conflict none: each stage says its own.
    assert fit(index, make_request(2), ["a"]).rejections["a"].reason is Reason.CORDONED
    assert fit(index, make_request(1), ["a"]).rejections["a"].reason is Reason.CONFLICTED
    assert index.inventory("a").cordoned == frozenset({"a-gpu1"})
    index.remove_node("a")
    index.upsert_node(make_node("a", 2))
    # Kept across the removal (the marks are the conflict's, not the inventory's) until
    # cleared.
    assert index.conflicted("a") == frozenset({"a-gpu0"})
    index.set_conflicted("a", ())
    assert index.conflicted("a") == frozenset()


def test_a_node_removed_and_added_again_keeps_its_conflicted_devices_refused() -> None:
    index = make_index(make_node("a", 2))
    one = make_request(1)
    index.set_conflicted("a", ["a-gpu0", "a-gpu1"])
    assert fit(index, one, ["a"]).rejections["a"].reason is Reason.CONFLICTED
    index.remove_node("a")
    index.upsert_node(make_node("a", 2))
    assert fit(index, one, ["a"]).rejections["a"].reason is Reason.CONFLICTED
    # The same through the bulk add, and for marks set while the node is not held.
    index.remove_node("a")
    index.set_conflicted("a", ["a-gpu1"])
    assert index.conflicted("a") == frozenset({"a-gpu1"})
    index.add_nodes([make_node("a", 2)])
    assert index.conflicted("a") == frozenset({"a-gpu1"})
    chosen = choose_devices(index, one, "a")
    assert isinstance(chosen, PodAssignment)
    assert [g.uuid for grants in chosen.containers for g in grants] == ["a-gpu0"]
    assert fit(index, make_request(2), ["a"]).rejections["a"].reason is Reason.CONFLICTED
    index.set_conflicted("a", ())
    assert fit(index, make_request(2), ["a"]).rejections == {}
