"""A Node object's status as the filter body carries it: capacity and allocatable reach the
inventory as text, whatever JSON type a sender used, so one odd Node never fails a request."""

from __future__ import annotations

import json

from vgpu_extender.api.wire import decode_args


def _body(status: object) -> bytes:
    node = {"metadata": {"name": "n1", "resourceVersion": "7"}, "status": status}
    return json.dumps({"Pod": {"metadata": {"uid": "u"}}, "Nodes": {"items": [node]}}).encode()


def test_capacity_and_allocatable_are_read_as_text() -> None:
    status = {"capacity": {"metax-tech.com/gpu": 4, "cpu": "8"}, "allocatable": {"cpu": 7.5}}
    args = decode_args(_body(status))
    assert args.nodes is not None
    view = args.nodes[0].load()
    assert view.capacity == {"metax-tech.com/gpu": "4", "cpu": "8"}
    assert view.allocatable == {"cpu": "7.5"}


def test_a_node_without_status_has_none_read() -> None:
    args = decode_args(_body(None))
    assert args.nodes is not None
    view = args.nodes[0].load()
    assert view.capacity is None and view.allocatable is None
