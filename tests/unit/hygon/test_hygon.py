"""The Hygon vendor with HAMi's literals (``pkg/device/hygon``): the config section,
request parsing (cores default 100, memory times the factor), the type and uuid
selectors, the ``hami.io/node-dcu-register`` inventory (HAMi's valid and invalid test
values), the handshake key, the dcu pod annotations, admission and hostile input."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.domain import (
    ContainerRequest,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    Reason,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.hygon import HygonConfig, HygonVendor, hygon_vendors
from vgpu_extender.vendors.hygon.allocation_codec import NODE_LOCK

VENDOR = HygonVendor()


def _pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u1", "annotations": annotations or {}},
        "spec": {"initContainers": list(init), "containers": list(containers)},
    }


def _ctr(
    name: str = "c",
    *,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": limits or {}, "requests": requests or {}}}


def test_defaults_and_names() -> None:
    assert VENDOR.name == "DCU"
    assert VENDOR.resource_names == {"hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"}
    assert VENDOR.inventory_annotation == "hami.io/node-dcu-register"
    assert VENDOR.assignment_annotation == "hami.io/dcu-devices-allocated"
    assert NODE_LOCK == "hami.io/mutex.lock"


def test_the_section_renames_resources_and_scales_memory() -> None:
    vendor = hygon_vendors(
        {
            "resourceCountName": "hygon.com/dcu",
            "resourceMemoryName": "hygon.com/mem",
            "memoryFactor": 2,
        }
    )
    (ask,) = vendor.parse_pod(
        _pod(_ctr(limits={"hygon.com/dcu": "1", "hygon.com/mem": "1024"}))
    ).containers
    assert (ask.count, ask.memory_mib, ask.cores) == (1, 2048, 100)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"resourceCountName": ""}, "resourceCountName"),
        ({"memoryFactor": "2"}, "memoryFactor"),
        ({"memoryFactor": -1}, "memoryFactor"),
        ({"dcuName": "x"}, "dcuName"),
    ],
    ids=["empty name", "factor as text", "negative factor", "unknown key"],
)
def test_bad_settings_name_the_key(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        HygonConfig.from_mapping(settings)


def test_a_bare_count_asks_for_a_whole_dcu() -> None:
    (ask,) = VENDOR.parse_pod(_pod(_ctr(limits={"hygon.com/dcunum": "1"}))).containers
    assert ask == ContainerRequest("c", count=1, memory_percent=100, cores=100, vendor="DCU")


def test_a_vdcu_ask() -> None:
    limits = {"hygon.com/dcunum": "1", "hygon.com/dcumem": "2048", "hygon.com/dcucores": "1"}
    (ask,) = VENDOR.parse_pod(_pod(_ctr(requests=limits))).containers
    assert (ask.count, ask.memory_mib, ask.memory_percent, ask.cores) == (1, 2048, 0, 1)


def test_memory_alone_asks_for_nothing() -> None:
    request = VENDOR.parse_pod(_pod(_ctr(limits={"hygon.com/dcumem": "2048"})))
    assert not request.managed


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("hygon.com/dcunum", "1.5"),
        ("hygon.com/dcunum", "3000000000"),
        ("hygon.com/dcumem", "-1"),
        ("hygon.com/dcucores", "a lot"),
    ],
    ids=["fractional count", "count over int32", "negative memory", "bad cores"],
)
def test_bad_quantities_name_the_resource(resource: str, value: str) -> None:
    limits = {"hygon.com/dcunum": "1", resource: value}
    with pytest.raises(RequestError, match=resource.replace(".", r"\.")):
        VENDOR.parse_pod(_pod(_ctr(limits=limits)))


def test_type_and_uuid_selectors() -> None:
    pod = _pod(
        _ctr(limits={"hygon.com/dcunum": "1"}),
        annotations={
            "hygon.com/use-dcutype": "DCU-K100_AI,Z100",
            "hygon.com/nouse-dcutype": "Z100L",
            "hygon.com/use-gpuuuid": "DCU-TPXS320016070601",
            "hygon.com/nouse-gpuuuid": "DCU-TPXS320016070602, ",
        },
    )
    selector = VENDOR.parse_pod(pod).selector
    assert selector.use_types == ("dcu-k100_ai", "z100")
    assert selector.avoid_types == ("z100l",)
    assert selector.use_uuids == ("DCU-TPXS320016070601",)
    assert selector.avoid_uuids == ("DCU-TPXS320016070602",)
    assert selector.accepts_type("DCU-K100_AI") and not selector.accepts_type("DCU-Z100L")


def test_the_registration_literal_is_read() -> None:
    devices = VENDOR.decode_node(
        NodeFacts(
            "node-a",
            annotations={"hami.io/node-dcu-register": "test-0,1,1024,100,DCU,0,true,0,test:"},
        )
    )
    assert devices is not None
    (device,) = devices
    assert (device.uuid, device.count, device.memory_mib, device.cores, device.type) == (
        "test-0",
        1,
        1024,
        100,
        "DCU",
    )
    assert device.vendor == "DCU" and device.healthy


@pytest.mark.parametrize("value", [":", "", "test-0,1,1024,100,DCU:"], ids=repr)
def test_hamis_invalid_registrations_are_errors(value: str) -> None:
    with pytest.raises(InventoryError):
        VENDOR.decode_node(NodeFacts("node-a", annotations={"hami.io/node-dcu-register": value}))


def test_a_node_without_the_registration_has_no_dcu() -> None:
    assert (
        VENDOR.decode_node(
            NodeFacts("node-a", annotations={"hami.io/node-register-Ascend910B3": "[]"})
        )
        is None
    )


def test_the_handshake_is_the_dcu_key() -> None:
    shake = VENDOR.handshake
    assert shake is not None
    assert shake.annotation == "hami.io/node-handshake-dcu"
    assert shake.resource == "hygon.com/dcunum"


def test_patch_annotations_literal() -> None:
    assignment = PodAssignment("node1", ((DeviceGrant("test1", 2048, 1, vendor="DCU"),),), (False,))
    annotations = VENDOR.bind_annotations(assignment, bind_time=9)
    assert annotations == {
        "hami.io/vgpu-node": "node1",
        "hami.io/dcu-devices-to-allocate": "test1,DCU,2048,1:;",
        "hami.io/dcu-devices-allocated": "test1,DCU,2048,1:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "9",
    }
    decoded = VENDOR.decode_assignment(annotations["hami.io/dcu-devices-allocated"], init=(False,))
    assert decoded == assignment.containers


def test_admission_marks_a_container_with_the_count_in_limits() -> None:
    admitted = VENDOR.admit(_ctr(limits={"hygon.com/dcunum": "1"}), _pod())
    assert admitted is not None and admitted.uses and not admitted.limits
    assert VENDOR.admit(_ctr(limits={"hygon.com/dcumem": "1"}), _pod()) is None


def test_reasons_read_as_hamis() -> None:
    assert VENDOR.wording.text(Reason.UUID_MISMATCH) == "CardUuidMismatch"
    assert VENDOR.wording.text(Reason.NO_DEVICES) == "no dcus"
    texts = VENDOR.wording.all_texts()
    assert not any(a != b and b.startswith(a) for a in texts for b in texts)


def test_the_share_is_the_generic_fit() -> None:
    assert VENDOR.share.name == "DCU" and VENDOR.share.pick is None


def test_the_webhook_writes_no_cores_for_a_bare_count() -> None:
    assert VENDOR.admission.count == "hygon.com/dcunum"
    assert VENDOR.admission.cores is None
