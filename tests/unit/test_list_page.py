"""``decode_page``: a list answer's items as plain objects, less their managedFields,
decoded whole or an item at a time (``pace``), with the same result either way."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from vgpu_extender.kube.client import Pace
from vgpu_extender.kube.errors import KubeError
from vgpu_extender.kube.list_page import decode_page

#: Every field of ObjectMeta the extender keeps, each with a value of its own shape.
METADATA: dict[str, Any] = {
    "name": "web-0",
    "generateName": "web-",
    "namespace": "team-a",
    "uid": "uid-web-0",
    "resourceVersion": "42",
    "generation": 3,
    "creationTimestamp": "2026-01-01T00:00:00Z",
    "deletionTimestamp": "2026-01-02T00:00:00Z",
    "deletionGracePeriodSeconds": 30,
    "labels": {"app": "web"},
    "annotations": {"hami.io/vgpu-node": "gpu-1", "hami.io/bind-phase": "success"},
    "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "u", "controller": True}],
    "finalizers": ["example.com/keep"],
}
MANAGED = [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}]


def _pod(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**METADATA, **metadata},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "resources": {}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture(params=["whole", "paced"])
def pace(request: pytest.FixtureRequest) -> Pace | None:
    """Each test runs on both decodes: the whole page at once, and item by item."""
    return None if request.param == "whole" else lambda: None


@pytest.fixture
def decoded(pace: Pace | None) -> Any:
    def decode(body: Any) -> dict[str, Any]:
        return decode_page(msgspec.json.encode(body), "list pods", pace=pace)

    return decode


def test_items_come_whole_but_for_their_managed_fields(decoded: Any) -> None:
    kept = _pod()
    sent = copy.deepcopy(kept)
    sent["metadata"]["managedFields"] = MANAGED
    sent["metadata"]["selfLink"] = "/api/v1/namespaces/team-a/pods/web-0"
    body = {"kind": "PodList", "metadata": {"resourceVersion": "9", "continue": "t"}}

    page = decoded({**body, "apiVersion": "v1", "items": [sent, {"metadata": {"name": "b"}}]})

    assert page == {"items": [kept, {"metadata": {"name": "b"}}], "metadata": body["metadata"]}


@pytest.mark.parametrize(
    ("item", "plain"),
    [
        ({}, {}),
        ({"metadata": None, "spec": None}, {"metadata": None, "spec": None}),
        ({"metadata": {"annotations": None}}, {"metadata": {"annotations": None}}),
        ({"metadata": {"name": 7}}, {"metadata": {"name": 7}}),
    ],
    ids=["empty", "null-sections", "null-field", "field-of-another-type"],
)
def test_odd_items_come_as_sent_for_the_object_readers_to_judge(
    item: dict[str, Any], plain: dict[str, Any], decoded: Any
) -> None:
    # kube.objects names what is wrong with one object; the page stands.
    assert decoded({"items": [item]})["items"] == [plain]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "JSON is malformed"),
        (b"[]", r"Expected `object`, got `array`"),
        (b'{"items": {}}', r"Expected `array \| null`, got `object` - at `\$.items`"),
        (b'{"items": [1]}', r"Expected `object`, got `int` - at `\$.items\[0\]`"),
        (b'{"items": [{"metadata": []}]}', r"at `\$.items\[0\].metadata`"),
        (b'{"metadata": "v1"}', r"at `\$.metadata`"),
    ],
    ids=["not-json", "not-an-object", "items-object", "item-number", "metadata-list", "page-meta"],
)
def test_an_answer_that_is_no_list_is_refused_naming_where(
    body: bytes, message: str, pace: Pace | None
) -> None:
    with pytest.raises(
        KubeError, match=f"^list pods: the API server sent an invalid list: .*{message}"
    ):
        decode_page(body, "list pods", pace=pace)


def test_an_item_refused_deep_down_is_named_by_its_place_in_the_page(pace: Pace | None) -> None:
    body = msgspec.json.encode({"items": [_pod(), _pod(), {"metadata": 5}]})

    with pytest.raises(KubeError, match=r"got `int` - at `\$.items\[2\].metadata`$"):
        decode_page(body, "list pods", pace=pace)


def test_no_items_is_an_empty_page(pace: Pace | None) -> None:
    assert decode_page(b'{"items": null}', "list nodes", pace=pace) == {"items": [], "metadata": {}}
    assert decode_page(b"{}", "list nodes", pace=pace) == {"items": [], "metadata": {}}


def test_a_paced_decode_calls_pace_after_each_item() -> None:
    names = [f"web-{i}" for i in range(5)]
    body = msgspec.json.encode({"items": [_pod(name=n) for n in names], "metadata": {}})
    calls: list[None] = []

    page = decode_page(body, "list pods", pace=lambda: calls.append(None))

    assert [item["metadata"]["name"] for item in page["items"]] == names
    assert len(calls) == len(names)


def test_a_paced_decode_paces_as_it_goes_not_once_the_page_is_decoded() -> None:
    # The third item is refused: the two before it were decoded, and paced, first.
    body = msgspec.json.encode({"items": [_pod(), _pod(), 3, _pod()]})
    calls: list[None] = []

    with pytest.raises(KubeError, match=r"at `\$.items\[2\]`$"):
        decode_page(body, "list pods", pace=lambda: calls.append(None))

    assert len(calls) == 2
