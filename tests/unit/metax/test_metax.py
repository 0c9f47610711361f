"""MetaX: the config section, both backends' requests (whole cards; sGPU limits only,
vmemory in GiB without a unit), the capacity inventory and the sGPU literal, the share
stages on devices and a grid, the webhook's sGPU rules, the pod annotations byte for
byte, the topology score literal, and hostile input."""

from __future__ import annotations

import pytest

from tests.support.hami_checks import (
    assert_words_distinct,
    container,
    grid_verdicts,
    pod,
    verdict,
)
from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    Reason,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.metax import MetaxConfig, metax_vendors
from vgpu_extender.vendors.metax.admission import check_container, pod_annotations
from vgpu_extender.vendors.metax.inventory_codec import devices_from_capacity
from vgpu_extender.vendors.metax.request import vmemory_mib
from vgpu_extender.vendors.metax.scoring import topology_score
from vgpu_extender.vendors.metax.share import METAX_GPU_SHARE, METAX_SGPU_SHARE

GPU, SGPU = metax_vendors({})
#: HAMi's metax/sdevice_test.go literal.
SGPU_LITERAL = (
    '[{"uuid": "GPU-123", "model": "sgpu", "totalDevCount": 16, "totalCompute": 100, '
    '"bdf": "0000:44:00.0", "totalVRam" : 32768, "numa": 1, "healthy": true, '
    '"qosPolicy": "fixed-share"}]'
)


def test_config_defaults_and_renames() -> None:
    assert MetaxConfig.from_mapping({}) == MetaxConfig(
        "metax-tech.com/gpu",
        "metax-tech.com/sgpu",
        "metax-tech.com/vcore",
        "metax-tech.com/vmemory",
        False,
    )
    config = MetaxConfig.from_mapping({"resourceVCountName": "m/s", "sgpuTopologyAware": "true"})
    assert (config.sgpu_resource, config.sgpu_topology_aware) == ("m/s", True)
    gpu, sgpu = metax_vendors({"resourceCountName": "m/g"})
    assert gpu.resource_names == {"m/g"}
    assert sgpu.resource_names == {
        "metax-tech.com/sgpu",
        "metax-tech.com/vcore",
        "metax-tech.com/vmemory",
    }
    assert (gpu.name, sgpu.name) == ("Metax-GPU", "Metax-SGPU")


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"resourceMemoryName": "x"}, "resourceMemoryName"),
        ({"resourceVCoreName": ""}, "resourceVCoreName"),
        ({"sgpuTopologyAware": "maybe"}, "sgpuTopologyAware"),
    ],
    ids=["unknown key", "empty name", "bad flag"],
)
def test_bad_settings_name_the_key(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        MetaxConfig.from_mapping(settings)


# -- requests ----------------------------------------------------------------------


def test_whole_cards_from_limits_or_requests() -> None:
    (init, app) = GPU.parse_pod(
        pod(
            container("a", requests={"metax-tech.com/gpu": "2"}),
            init=[container("i", limits={"metax-tech.com/gpu": 1})],
        )
    ).containers
    assert (init.init, init.count, init.memory_percent, init.cores) == (True, 1, 100, 100)
    assert (app.count, app.memory_mib, app.vendor) == (2, 0, "Metax-GPU")


@pytest.mark.parametrize(
    ("text", "mib"),
    [("16", 16384), ("1024Mi", 1024), ("16Gi", 16384), ("1500000", 1536000000), ("1G", 953)],
    ids=["bare is GiB", "Mi", "Gi", "large bare", "bytes floored"],
)
def test_vmemory_units(text: str, mib: int) -> None:
    assert vmemory_mib(text, field="vmemory") == mib


@pytest.mark.parametrize("text", ["2100001", "-1Gi", "lots"], ids=["over int32", "neg", "junk"])
def test_bad_vmemory_is_a_request_error(text: str) -> None:
    with pytest.raises(RequestError):
        vmemory_mib(text, field="vmemory")


def test_sgpu_reads_limits_only_with_defaults() -> None:
    (ask,) = SGPU.parse_pod(
        pod(container(limits={"metax-tech.com/sgpu": 1, "metax-tech.com/vmemory": "16"}))
    ).containers
    assert (ask.count, ask.memory_mib, ask.cores, ask.vendor) == (1, 16384, 100, "Metax-SGPU")
    (requested,) = SGPU.parse_pod(pod(container(requests={"metax-tech.com/sgpu": 1}))).containers
    assert requested.count == 0
    (bare,) = SGPU.parse_pod(
        pod(container(limits={"metax-tech.com/sgpu": 2, "metax-tech.com/vcore": "30"}))
    ).containers
    assert (bare.count, bare.memory_percent, bare.cores) == (2, 100, 30)


def test_an_online_pod_is_charged_no_cores_and_uuids_select() -> None:
    request = SGPU.parse_pod(
        pod(
            container(limits={"metax-tech.com/sgpu": 1, "metax-tech.com/vcore": "30"}),
            annotations={
                "metax-tech.com/sgpu-app-class": "online",
                "metax-tech.com/use-gpuuuid": "GPU-1,GPU-2",
                "metax-tech.com/nouse-gpuuuid": "GPU-3",
            },
        )
    )
    assert request.containers[0].cores == 0
    assert request.selector.use_uuids == ("GPU-1", "GPU-2")
    assert request.selector.avoid_uuids == ("GPU-3",)


# -- inventory ---------------------------------------------------------------------


def test_whole_cards_from_capacity() -> None:
    assert devices_from_capacity("node-a", {"metax-tech.com/gpu": "2"}) == tuple(
        Device(f"node-a-metax-{i}", i, 1, 65536, 100, "Metax-GPU", vendor="Metax-GPU")
        for i in range(2)
    )
    assert devices_from_capacity("n", {}) == ()
    # The count is the node's capacity, not an annotation.
    assert GPU.decode_node(NodeFacts("node-a", annotations={"metax-tech.com/gpu": "2"})) is None
    with pytest.raises(InventoryError):
        devices_from_capacity("n", {"metax-tech.com/gpu": "two"})


def test_the_sgpu_literal() -> None:
    assert SGPU.decode_node(
        NodeFacts("node-a", annotations={"metax-tech.com/node-gpu-devices": SGPU_LITERAL})
    ) == (
        Device(
            "GPU-123",
            0,
            16,
            32768,
            100,
            "Metax-SGPU",
            1,
            healthy=True,
            vendor="Metax-SGPU",
            custom_info=(("Model", "sgpu"), ("QosPolicy", "fixed-share")),
        ),
    )
    devices = SGPU.decode_inventory(SGPU_LITERAL)
    assert SGPU.decode_inventory(SGPU.encode_inventory(devices)) == devices


@pytest.mark.parametrize(
    "value",
    [
        "",
        "[]",
        "{}",
        "[1]",
        '[{"uuid":""}]',
        '[{"uuid":"a","totalVRam":-1}]',
        '[{"uuid":"a","healthy":"yes"}]',
        '[{"uuid":"a"},{"UUID":"a"}]',
        '[{"uuid":"a","linkZone":[1]}]',
    ],
)
def test_hostile_sgpu_inventories(value: str) -> None:
    with pytest.raises(InventoryError):
        SGPU.decode_inventory(value)


# -- share -------------------------------------------------------------------------


def _ask(memory: int = 0, cores: int = 100) -> ContainerRequest:
    return ContainerRequest(
        "c", count=1, memory_mib=memory, memory_percent=0 if memory else 100, cores=cores
    )


SHARES = [
    ("sgpu fits", (16, 32768, 100), (2, 8192, 40), _ask(8192, 30), None),
    ("slots", (2, 32768, 100), (2, 8192, 40), _ask(1, 1), Reason.SLOTS),
    ("exclusive on used", (16, 32768, 100), (1, 1, 1), _ask(1, 100), Reason.EXCLUSIVE),
    ("memory", (16, 32768, 100), (1, 30000, 1), _ask(8192, 10), Reason.MEMORY),
    ("cores", (16, 32768, 100), (1, 1, 80), _ask(1, 30), Reason.CORES),
    ("online needs no cores left", (16, 32768, 100), (1, 1, 100), _ask(1, 0), None),
    ("whole card on empty", (1, 65536, 100), (0, 0, 0), _ask(), None),
    ("whole card on used", (1, 65536, 100), (1, 65536, 100), _ask(), Reason.SLOTS),
]


@pytest.mark.parametrize(
    ("case", "total", "used", "ask", "want"), SHARES, ids=[c[0] for c in SHARES]
)
def test_stages_on_one_device(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    assert verdict(METAX_SGPU_SHARE, total, used, ask) == want
    assert verdict(METAX_GPU_SHARE, total, used, ask) == want


@pytest.mark.parametrize("ask", sorted({c[3] for c in SHARES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    cells = [(c[1], c[2]) for c in SHARES]
    assert grid_verdicts(METAX_SGPU_SHARE, cells, ask) == [
        verdict(METAX_SGPU_SHARE, t, u, ask) for t, u in cells
    ]


# -- admission ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "count"),
    [
        ({"metax-tech.com/sgpu-app-class": "batch"}, 1),
        ({"metax-tech.com/sgpu-app-class": "online"}, 2),
        ({"metax-tech.com/sgpu-app-class": "offline"}, 3),
        ({"metax-tech.com/sgpu-qos-policy": "strict"}, 1),
    ],
    ids=["unknown class", "online count 2", "offline count 3", "unknown qos"],
)
def test_the_webhook_refuses(annotations: dict[str, str], count: int) -> None:
    with pytest.raises(RequestError):
        check_container(annotations, count)
    with pytest.raises(RequestError):
        SGPU.admit(container(limits={"metax-tech.com/sgpu": count}), pod(annotations=annotations))


def test_the_webhook_accepts_and_defaults_the_qos() -> None:
    check_container({"metax-tech.com/sgpu-app-class": "online"}, 1)
    check_container({"metax-tech.com/sgpu-qos-policy": "burst-share"}, 4)
    assert pod_annotations({}) == {"metax-tech.com/sgpu-qos-policy": "best-effort"}
    assert pod_annotations({"metax-tech.com/sgpu-app-class": "online"}) == {}
    assert pod_annotations({"metax-tech.com/sgpu-qos-policy": "fixed-share"}) == {}
    admitted = SGPU.admit(container(limits={"metax-tech.com/sgpu": 2}), pod())
    assert admitted is not None and admitted.uses and not admitted.limits
    assert admitted.pod_annotations == {"metax-tech.com/sgpu-qos-policy": "best-effort"}
    assert SGPU.admit(container(limits={"other": 2}), pod()) is None


# -- pod annotations ---------------------------------------------------------------


def test_gpu_bind_annotations() -> None:
    assignment = PodAssignment(
        "node-a", ((DeviceGrant("node-a-metax-0", 65536, 100, "Metax-GPU"),), ())
    )
    assert GPU.bind_annotations(assignment, bind_time=1700000000) == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/metax-gpu-devices-to-allocate": "node-a-metax-0,Metax-GPU,65536,100:;;",
        "hami.io/metax-gpu-devices-allocated": "node-a-metax-0,Metax-GPU,65536,100:;;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    assert GPU.names.node_lock is None


def test_sgpu_bind_annotations() -> None:
    assignment = PodAssignment(
        "node-a",
        (
            (),
            (
                DeviceGrant("GPU-123", 8192, 30, "Metax-SGPU"),
                DeviceGrant("GPU-7", 1, 0, "Metax-SGPU"),
            ),
        ),
    )
    annotations = SGPU.bind_annotations(assignment, bind_time=1700000000)
    devices = ";GPU-123,Metax-SGPU,8192,30:GPU-7,Metax-SGPU,1,0:;"
    assert annotations == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/metax-sgpu-devices-to-allocate": devices,
        "hami.io/metax-sgpu-devices-allocated": devices,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "metax-tech.com/gpu-devices-allocated": (
            '[[],[{"uuid":"GPU-123","compute":30,"vRam":8192},'
            '{"uuid":"GPU-7","compute":0,"vRam":1}]]'
        ),
        "metax-tech.com/predicate-time": "1700000000000000000",
    }
    assert SGPU.names.node_lock == "hami.io/mutex.lock"
    assert SGPU.decode_assignment(devices, init=(True, False)) == assignment.containers


# -- scoring and words -------------------------------------------------------------


def test_topology_score_literal() -> None:
    annotations = {
        "metax-tech.com/gpu.topology.losses": '{"1":100,"2":200}',
        "metax-tech.com/gpu.topology.scores": '{"1":300}',
    }
    assert topology_score(annotations, "binpack", 2) == 1800.0
    assert topology_score(annotations, "spread", 1) == 1700.0
    assert topology_score(annotations, "spread", 2) == 0.0
    assert topology_score(annotations, "numa", 1) == 0.0
    assert topology_score({"metax-tech.com/gpu.topology.losses": "{"}, "binpack", 1) == 0.0


def test_words_are_hamis_and_distinct() -> None:
    assert SGPU.wording.text(Reason.SLOTS) == "CardTimeSlicingExhausted"
    assert_words_distinct(GPU.wording)


def test_whole_cards_through_the_capacity_seam() -> None:
    assert GPU.capacity_keys == ("metax-tech.com/gpu",)
    assert GPU.node_keys == ()
    assert GPU.decode_capacity(
        NodeFacts("node-a", capacity={"metax-tech.com/gpu": "2"})
    ) == devices_from_capacity("node-a", {"metax-tech.com/gpu": "2"})
    assert GPU.decode_capacity(NodeFacts("node-a", capacity={"metax-tech.com/gpu": "0"})) is None
    assert GPU.decode_capacity(NodeFacts("node-a", capacity={"cpu": "8"})) is None
    assert SGPU.capacity_keys == () and SGPU.node_keys == ("metax-tech.com/node-gpu-devices",)
    assert SGPU.decode_capacity(NodeFacts("node-a", capacity={"metax-tech.com/gpu": "2"})) is None


def test_the_sgpu_codec_writes_go_json() -> None:
    (device,) = SGPU.decode_inventory(
        '[{"uuid":"g","totalDevCount":4,"model":"C500 <x>","linkZone":2,"healthy":true}]'
    )
    assert SGPU.encode_inventory((device,)) == (
        '[{"uuid":"g","totalDevCount":4,"totalCompute":0,"totalVRam":0,"numa":0,'
        '"healthy":true,"model":"C500 \\u003cx\\u003e","linkZone":2}]'
    )
    assert SGPU.decode_inventory(SGPU.encode_inventory((device,))) == (device,)
