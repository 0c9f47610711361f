"""The Iluvatar vendors with HAMi's literals (``pkg/device/iluvatar``): one vendor per
chip of the ``iluvatars:`` list (HAMi's four by default), request parsing (256 MiB
units, cores 0 when absent), the ``hami.io/node-<CW>-register`` inventory and
handshake keys, the uuid selector's ``no-use`` spelling, the pod annotations, the
webhook's multi-GPU cores and ``SOL_CONTINER_NAME``, and hostile input."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.domain import ContainerRequest, DeviceGrant, PodAssignment, RequestError
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.iluvatar import IluvatarConfig, iluvatar_vendors

VENDORS = {vendor.name: vendor for vendor in iluvatar_vendors({})}
V100 = VENDORS["MR-V100"]


def _pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u1", "annotations": annotations or {}},
        "spec": {"containers": list(containers)},
    }


def _ctr(
    name: str = "c",
    *,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    env: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    ctr: dict[str, Any] = {
        "name": name,
        "resources": {"limits": limits or {}, "requests": requests or {}},
    }
    if env is not None:
        ctr["env"] = env
    return ctr


def test_hamis_four_chips_by_default() -> None:
    assert list(VENDORS) == ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    assert V100.resource_names == {
        "iluvatar.ai/MR-V100-vgpu",
        "iluvatar.ai/MR-V100.vMem",
        "iluvatar.ai/MR-V100.vCore",
    }


def test_the_list_configures_chips() -> None:
    (vendor,) = iluvatar_vendors(
        {
            "iluvatars": [
                {
                    "chipName": "BI-V150",
                    "commonWord": "BI-V150",
                    "resourceCountName": "iluvatar.ai/vgpu",
                    "resourceMemoryName": "iluvatar.ai/vcuda-memory",
                    "resourceCoreName": "iluvatar.ai/vcuda-core",
                    "somethingNew": 1,
                }
            ]
        }
    )
    assert vendor.name == "BI-V150"
    assert vendor.resource_names == {
        "iluvatar.ai/vgpu",
        "iluvatar.ai/vcuda-memory",
        "iluvatar.ai/vcuda-core",
    }
    assert vendor.chip.chip_name == "BI-V150"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"iluvatars": {"commonWord": "x"}}, "iluvatars"),
        ({"iluvatars": []}, "iluvatars"),
        ({"iluvatars": [{"commonWord": "a b"}]}, "commonWord"),
        ({"iluvatars": [{"commonWord": "A"}, {"commonWord": "A"}]}, "more than once"),
        ({"iluvatars": [{"commonWord": "A", "resourceCoreName": ""}]}, "resourceCoreName"),
        ({"iluvatars": [{"commonWord": "A", "chipName": 3}]}, "chipName"),
        ({"iluvatar": []}, "iluvatar"),
    ],
    ids=["a mapping", "empty", "bad word", "repeated word", "empty name", "bad chip", "unknown"],
)
def test_bad_settings_name_the_key(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        IluvatarConfig.from_mapping(settings)


def test_memory_is_in_256_mib_units_and_cores_default_to_0() -> None:
    limits = {"iluvatar.ai/MR-V100-vgpu": "1", "iluvatar.ai/MR-V100.vMem": "8"}
    (ask,) = V100.parse_pod(_pod(_ctr(limits=limits))).containers
    assert ask == ContainerRequest("c", count=1, memory_mib=2048, cores=0, vendor="MR-V100")


def test_a_bare_count_asks_for_all_memory_and_no_cores() -> None:
    (ask,) = V100.parse_pod(_pod(_ctr(requests={"iluvatar.ai/MR-V100-vgpu": "1"}))).containers
    assert (ask.memory_mib, ask.memory_percent, ask.cores) == (0, 100, 0)


def test_each_chip_reads_only_its_own_resources() -> None:
    pod = _pod(_ctr(limits={"iluvatar.ai/MR-V50-vgpu": "1"}))
    assert not V100.parse_pod(pod).managed
    assert VENDORS["MR-V50"].parse_pod(pod).managed


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("iluvatar.ai/MR-V100.vMem", "1.5"),
        ("iluvatar.ai/MR-V100.vMem", "8388608"),
        ("iluvatar.ai/MR-V100.vMem", "16Gi"),
        ("iluvatar.ai/MR-V100.vCore", "-1"),
        ("iluvatar.ai/MR-V100-vgpu", "two"),
    ],
    ids=[
        "fractional memory",
        "memory over int32 MiB",
        "memory in bytes",
        "negative cores",
        "bad count",
    ],
)
def test_bad_quantities_name_the_resource(resource: str, value: str) -> None:
    limits = {"iluvatar.ai/MR-V100-vgpu": "1", resource: value}
    with pytest.raises(RequestError, match=resource.replace(".", r"\.")):
        V100.parse_pod(_pod(_ctr(limits=limits)))


def test_the_uuid_selector_spells_no_use() -> None:
    pod = _pod(
        _ctr(limits={"iluvatar.ai/MR-V100-vgpu": "1"}),
        annotations={
            "hami.io/use-MR-V100-uuid": "GPU-a,GPU-b",
            "hami.io/no-use-MR-V100-uuid": "GPU-c",
            "hami.io/nouse-MR-V100-uuid": "GPU-a",
        },
    )
    selector = V100.parse_pod(pod).selector
    assert selector.use_uuids == ("GPU-a", "GPU-b")
    assert selector.avoid_uuids == ("GPU-c",)


def test_the_registration_literal_is_read() -> None:
    value = "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae,10,8192,100,MR-V100,0,true:"
    devices = V100.decode_node(
        NodeFacts("node-a", annotations={"hami.io/node-MR-V100-register": value})
    )
    assert devices is not None
    (device,) = devices
    assert (device.uuid, device.count, device.memory_mib, device.cores, device.type) == (
        "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae",
        10,
        8192,
        100,
        "MR-V100",
    )
    assert device.vendor == "MR-V100" and device.healthy
    assert (
        V100.decode_node(NodeFacts("node-a", annotations={"hami.io/node-MR-V50-register": value}))
        is None
    )


def test_the_handshake_is_per_chip() -> None:
    shake = V100.handshake
    assert shake is not None
    assert shake.annotation == "hami.io/node-handshake-MR-V100"
    assert shake.resource == "iluvatar.ai/MR-V100-vgpu"


def test_patch_annotations_literal() -> None:
    grant = DeviceGrant("k8s-gpu-iluvatar-0", 0, 0, vendor="MR-V100")
    assignment = PodAssignment("node1", ((grant,),), (False,))
    annotations = V100.bind_annotations(assignment, bind_time=3)
    assert annotations == {
        "hami.io/vgpu-node": "node1",
        "hami.io/MR-V100-devices-to-allocate": "k8s-gpu-iluvatar-0,MR-V100,0,0:;",
        "hami.io/MR-V100-devices-allocated": "k8s-gpu-iluvatar-0,MR-V100,0,0:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "3",
    }
    assert V100.assignment_annotation == "hami.io/MR-V100-devices-allocated"
    decoded = V100.decode_assignment("k8s-gpu-iluvatar-0,MR-V100,0,0:;", init=(False,))
    assert decoded == ((grant,),)


def test_another_chips_grants_are_not_written() -> None:
    grant = DeviceGrant("g", 0, 0, vendor="MR-V50")
    assert V100.bind_annotations(PodAssignment("n", ((grant,),), (False,)), bind_time=1) == {}


def test_the_webhook_makes_several_gpus_whole_and_names_the_container() -> None:
    admitted = V100.admit(_ctr("train", limits={"iluvatar.ai/MR-V100-vgpu": "2"}), _pod())
    assert admitted is not None and admitted.uses
    assert admitted.limits == {"iluvatar.ai/MR-V100.vCore": "200"}
    assert admitted.env == (("SOL_CONTINER_NAME", "train"),)
    parsed = V100.parse_pod(
        _pod(_ctr(limits={"iluvatar.ai/MR-V100-vgpu": "2", **admitted.limits}))
    ).containers[0]
    assert parsed.exclusive


def test_the_webhook_leaves_one_gpu_and_a_given_name_alone() -> None:
    ctr = _ctr(
        limits={"iluvatar.ai/MR-V100-vgpu": "1"},
        env=[{"name": "SOL_CONTINER_NAME", "value": "mine"}],
    )
    admitted = V100.admit(ctr, _pod())
    assert admitted is not None and admitted.uses and not admitted.limits and not admitted.env
    assert V100.admit(_ctr(requests={"iluvatar.ai/MR-V100-vgpu": "1"}), _pod()) is None


def test_the_webhook_refuses_a_bad_count() -> None:
    with pytest.raises(RequestError):
        V100.admit(_ctr(limits={"iluvatar.ai/MR-V100-vgpu": "1.5"}), _pod())


def test_the_share_is_the_generic_fit_per_chip() -> None:
    assert V100.share.name == "MR-V100" and V100.share.pick is None
