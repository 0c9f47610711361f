"""Pod annotations a vendor's admission adds (``ContainerAdmission.pod_annotations``):
merged over the containers, never replacing one the pod has, and written as JSON Patch
operations whose paths escape ``/`` and ``~`` (RFC 6901)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from vgpu_extender.services import admission
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.nvidia import NvidiaVendor

SLASHED = "example.com/tier"
TILDED = "example.com/a~b"


class _Annotating(NvidiaVendor):
    """NVIDIA, whose admission of a GPU container adds the pod annotations its
    ``example.com/annotate`` env entry names (``key=value;key=value``)."""

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        given = {e["name"]: e["value"] for e in container.get("env", [])}
        wanted = given.get("ANNOTATE", "")
        pairs = dict(item.split("=", 1) for item in wanted.split(";") if item)
        return ContainerAdmission(uses=True, pod_annotations=pairs) if pairs else None


def _pod(*annotate: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    containers = [
        {
            "name": f"c{i}",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
            "env": [{"name": "ANNOTATE", "value": wanted}],
        }
        for i, wanted in enumerate(annotate)
    ]
    metadata: dict[str, Any] = {"name": "p", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"containers": containers}}


def _annotation_ops(pod: dict[str, Any]) -> list[dict[str, Any]]:
    decision = admission.decide(pod, vendor=_Annotating(), scheduler_name="vgpu-scheduler")
    assert decision.allowed, decision.message
    return [op for op in decision.patch if op["path"].startswith("/metadata")]


def test_a_pod_without_annotations_gets_them_in_one_operation() -> None:
    ops = _annotation_ops(_pod(f"{SLASHED}=gold;{TILDED}=x"))
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {SLASHED: "gold", TILDED: "x"}}
    ]


def test_keys_are_json_pointer_escaped_and_the_pods_own_value_stays() -> None:
    pod = _pod(f"{SLASHED}=gold;{TILDED}=x", annotations={SLASHED: "bronze", "other": "y"})
    ops = _annotation_ops(pod)
    # "/" becomes "~1" and "~" becomes "~0"; the user's tier is not replaced.
    assert ops == [{"op": "add", "path": "/metadata/annotations/example.com~1a~0b", "value": "x"}]


def test_the_later_container_wins_a_key_two_containers_name() -> None:
    ops = _annotation_ops(_pod(f"{SLASHED}=gold", f"{SLASHED}=silver;k=v"))
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {SLASHED: "silver", "k": "v"}}
    ]


@pytest.mark.parametrize("annotations", [None, {}], ids=["absent", "empty"])
def test_nothing_to_add_writes_no_metadata_operation(annotations: dict[str, str] | None) -> None:
    assert _annotation_ops(_pod("", annotations=annotations)) == []
    # Everything asked for is there already: nothing is written either.
    assert _annotation_ops(_pod("k=v", annotations={"k": "mine"})) == []


def test_a_pod_with_null_metadata_gets_metadata_created() -> None:
    pod = _pod("k=v")
    pod["metadata"] = None
    decision = admission.decide(pod, vendor=_Annotating(), scheduler_name="vgpu-scheduler")
    assert decision.allowed, decision.message
    assert {"op": "add", "path": "/metadata", "value": {"annotations": {"k": "v"}}} in (
        decision.patch
    )
