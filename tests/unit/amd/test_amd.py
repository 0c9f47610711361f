"""AMD: HAMi's config names, request parsing (MiB, percent of compute units, defaults),
the register literal, the share stages on devices and on a grid (compute units from a
percent), the pod annotations byte for byte, and hostile input."""

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
    AnnotationError,
    ContainerRequest,
    Device,
    DeviceGrant,
    DeviceUsage,
    InventoryError,
    PodAssignment,
    Reason,
    RequestError,
)
from vgpu_extender.domain.share import Capacity
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.amd import AmdConfig, AmdVendor, amd_vendors
from vgpu_extender.vendors.amd.inventory_codec import node_healthy
from vgpu_extender.vendors.amd.share import AMD_SHARE, HeldUnits
from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK

VENDOR = AmdVendor()
#: HAMi's amd/device_test.go registration literal.
REGISTER = (
    '[{"id":"GPU-0","index":0,"count":1,"devmem":8192,"devcore":100,'
    '"type":"amd","numa":0,"health":true}]'
)


def _asks(*containers: dict[str, object], **kw: object) -> tuple[ContainerRequest, ...]:
    return VENDOR.parse_pod(pod(*containers, **kw)).containers  # type: ignore[arg-type]


# -- config ------------------------------------------------------------------------


def test_config_defaults_and_renames() -> None:
    assert AmdConfig.from_mapping({}) == AmdConfig(
        "amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores"
    )
    renamed = AmdConfig.from_mapping({"resourceCountName": "x.com/g", "resourceCoreName": "x/c"})
    assert (renamed.count_resource, renamed.memory_resource, renamed.cores_resource) == (
        "x.com/g",
        "amd.com/gpumem",
        "x/c",
    )
    assert amd_vendors({"resourceMemoryName": "x/m"}).resource_names == {
        "amd.com/gpu",
        "x/m",
        "amd.com/gpucores",
    }


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"resourceName": "a"}, "resourceName"),
        ({"resourceCountName": ""}, "resourceCountName"),
        ({"resourceCountName": 3}, "resourceCountName"),
        ({"resourceCoreName": "a b"}, "resourceCoreName"),
    ],
    ids=["unknown key", "empty", "not a string", "a space"],
)
def test_bad_settings_name_the_key(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        AmdConfig.from_mapping(settings)


def test_settings_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="mapping"):
        AmdConfig.from_mapping(["amd"])  # type: ignore[arg-type]


# -- requests ----------------------------------------------------------------------


REQUESTS = [
    ("bare count: whole card", {"amd.com/gpu": "1"}, (1, 0, 100, 100)),
    ("memory in MiB", {"amd.com/gpu": 2, "amd.com/gpumem": "3000"}, (2, 3000, 0, 100)),
    ("percent of CUs", {"amd.com/gpu": "1", "amd.com/gpucores": "30"}, (1, 0, 100, 30)),
    ("canonical quantity", {"amd.com/gpu": "1", "amd.com/gpumem": "4k"}, (1, 4000, 0, 100)),
    ("count 0 asks nothing", {"amd.com/gpu": "0", "amd.com/gpumem": "10"}, (0, 0, 0, 0)),
    ("memory alone asks nothing", {"amd.com/gpumem": "10"}, (0, 0, 0, 0)),
]


@pytest.mark.parametrize(("case", "limits", "want"), REQUESTS, ids=[case[0] for case in REQUESTS])
def test_generate_resource_requests(
    case: str, limits: dict[str, object], want: tuple[int, int, int, int]
) -> None:
    (ask,) = _asks(container(limits=limits))
    assert (ask.count, ask.memory_mib, ask.memory_percent, ask.cores) == want
    assert ask.vendor == "AMD"


def test_limits_before_requests_and_init_first() -> None:
    asks = _asks(
        container("app", requests={"amd.com/gpu": "2"}),
        init=[container("setup", limits={"amd.com/gpu": "1"}, requests={"amd.com/gpu": "3"})],
    )
    assert [(a.name, a.init, a.count) for a in asks] == [("setup", True, 1), ("app", False, 2)]


@pytest.mark.parametrize(
    "limits",
    [
        {"amd.com/gpu": "1.5"},
        {"amd.com/gpu": "-1"},
        {"amd.com/gpu": "x"},
        {"amd.com/gpu": "1", "amd.com/gpucores": "0"},
        {"amd.com/gpu": "1", "amd.com/gpucores": "101"},
        {"amd.com/gpu": "1", "amd.com/gpumem": "1e12"},
    ],
    ids=["fraction", "negative", "garbage", "zero percent", "over 100", "over int32"],
)
def test_malformed_values_are_request_errors(limits: dict[str, object]) -> None:
    with pytest.raises(RequestError):
        _asks(container(limits=limits))


def test_type_and_uuid_selectors() -> None:
    request = VENDOR.parse_pod(
        pod(
            container(limits={"amd.com/gpu": 1}),
            annotations={
                "amd.com/use-gputype": "MI300X, mi250",
                "amd.com/nouse-gputype": "VF",
                "amd.com/use-gpu-uuid": "GPU-0,GPU-1,GPU-0",
                "amd.com/nouse-gpu-uuid": "GPU-2",
            },
        )
    )
    selector = request.selector
    assert (selector.use_types, selector.avoid_types) == (("mi300x", "mi250"), ("vf",))
    assert (selector.use_uuids, selector.avoid_uuids) == (("GPU-0", "GPU-1"), ("GPU-2",))
    assert selector.accepts_type("AMD Instinct MI300X") and not selector.accepts_type("MI300X VF")


def test_a_hostile_pod_is_a_request_error() -> None:
    with pytest.raises(RequestError):
        VENDOR.parse_pod({"spec": {"containers": "nope"}})
    with pytest.raises(RequestError):
        VENDOR.parse_pod({"metadata": {"annotations": {"amd.com/use-gpu-uuid": 3}}})


# -- inventory ---------------------------------------------------------------------


def test_the_register_literal() -> None:
    assert VENDOR.decode_node(
        NodeFacts("node-a", annotations={"hami.io/node-amd-register": REGISTER})
    ) == (Device("GPU-0", 0, 1, 8192, 100, "amd", 0, "hami-core", True, "AMD"),)
    assert (
        VENDOR.decode_node(NodeFacts("node-a", annotations={"hami.io/node-register-amd": REGISTER}))
        is None
    )
    assert VENDOR.inventory_annotation == "hami.io/node-amd-register"


def test_keys_match_case_insensitively_and_missing_fields_are_zero() -> None:
    (device,) = VENDOR.decode_inventory('[{"ID":"g","Count":2,"DevMem":1,"TYPE":"AMD MI300X"}]')
    assert (device.uuid, device.count, device.memory_mib, device.type) == ("g", 2, 1, "AMD MI300X")
    assert (device.index, device.numa, device.healthy, device.cores) == (0, 0, False, 0)
    (typeless,) = VENDOR.decode_inventory('[{"id":"g"}]')
    assert typeless.type == "amd"


def test_the_product_type_survives_a_round_trip() -> None:
    devices = VENDOR.decode_inventory(REGISTER)
    assert VENDOR.decode_inventory(VENDOR.encode_inventory(devices)) == devices
    assert VENDOR.encode_inventory(devices) == (
        '[{"id":"GPU-0","count":1,"devmem":8192,"devcore":100,"type":"amd","health":true}]'
    )


@pytest.mark.parametrize(
    "value",
    [
        "",
        "[]",
        "null",
        "{}",
        "[1]",
        '[{"id":""}]',
        '[{"id":"a,b"}]',
        '[{"id":"g","count":-1}]',
        '[{"id":"g"},{"id":"g"}]',
        '[{"id":"g","health":"yes"}]',
        "[NaN]",
    ],
)
def test_hostile_registrations_are_inventory_errors(value: str) -> None:
    with pytest.raises(InventoryError):
        VENDOR.decode_inventory(value)


@pytest.mark.parametrize(
    ("capacity", "healthy"),
    [
        ({"amd.com/gpu": "8"}, True),
        ({"amd.com/gpu": "0"}, False),
        ({}, False),
        ({"amd.com/gpu": "lots"}, False),
    ],
    ids=["positive", "zero", "absent", "unreadable"],
)
def test_health_comes_from_capacity(capacity: dict[str, str], healthy: bool) -> None:
    assert node_healthy(capacity, "amd.com/gpu") is healthy


# -- share -------------------------------------------------------------------------


def _ask(memory: int = 0, cores: int = 100) -> ContainerRequest:
    return ContainerRequest(
        "c", count=1, memory_mib=memory, memory_percent=0 if memory else 100, cores=cores
    )


SHARES = [
    ("fits", (10, 8192, 304), (1, 1024, 30), _ask(1024, 50), None),
    ("slots exhausted", (2, 8192, 304), (2, 1024, 30), _ask(1024, 10), Reason.SLOTS),
    ("memory", (10, 8192, 304), (1, 8000, 30), _ask(1024, 10), Reason.MEMORY),
    ("whole memory on a used card", (10, 8192, 304), (1, 1, 0), _ask(cores=10), Reason.MEMORY),
    ("percent of 304 CUs", (10, 8192, 304), (1, 1, 153), _ask(1, 50), Reason.CORES),
    ("152 CUs left are 50 percent", (10, 8192, 304), (1, 1, 152), _ask(1, 50), None),
    ("all CUs on a used card", (10, 8192, 304), (1, 1, 0), _ask(1, 100), Reason.EXCLUSIVE),
    ("all CUs on an empty card", (10, 8192, 304), (0, 0, 0), _ask(), None),
]


@pytest.mark.parametrize(
    ("case", "total", "used", "ask", "want"), SHARES, ids=[case[0] for case in SHARES]
)
def test_stages_on_one_device(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    assert verdict(AMD_SHARE, total, used, ask) == want


@pytest.mark.parametrize("ask", sorted({case[3] for case in SHARES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    cells = [(case[1], case[2]) for case in SHARES]
    assert grid_verdicts(AMD_SHARE, cells, ask) == [
        verdict(AMD_SHARE, total, used, ask) for total, used in cells
    ]


def test_a_share_takes_compute_units_and_a_held_one_keeps_them() -> None:
    assert AMD_SHARE.consumed(Capacity(10, 8192, 304), _ask(1024, 25)) == Capacity(1, 1024, 76)
    assert AMD_SHARE.consumed(Capacity(10, 8192, 304), _ask()) == Capacity(1, 8192, 304)
    held = AMD_SHARE.held(DeviceUsage(memory_mib=1024, cores=76, slots=1))
    assert isinstance(held, HeldUnits)
    assert AMD_SHARE.consumed(Capacity(10, 8192, 304), held) == Capacity(1, 1024, 76)
    assert verdict(AMD_SHARE, (10, 8192, 304), (1, 0, 228), held) is None  # type: ignore[arg-type]
    assert verdict(AMD_SHARE, (10, 8192, 304), (1, 0, 229), held) is Reason.CORES  # type: ignore[arg-type]


# -- pod annotations ---------------------------------------------------------------


def _grant(uuid: str, memory: int, cores: int, vendor: str = "AMD") -> DeviceGrant:
    return DeviceGrant(uuid, memory, cores, vendor)


def test_bind_annotations_byte_for_byte() -> None:
    assignment = PodAssignment(
        "node-a",
        (
            (),
            (_grant("GPU-0", 1024, 76), _grant("GPU-1", 8192, 304)),
            (_grant("n", 1, 1, "NVIDIA"),),
        ),
        (True, False, False),
    )
    devices = "GPU-0,AMD,1024,76:GPU-1,AMD,8192,304:;;"
    assert VENDOR.bind_annotations(assignment, bind_time=1700000000) == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/amd-devices-to-allocate": ";" + devices,
        "hami.io/amd-devices-allocated": ";" + devices,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    assert VENDOR.assignment_annotation == "hami.io/amd-devices-allocated"
    assert VENDOR.names.node_lock == MUTEX_LOCK == "hami.io/mutex.lock"


def test_a_pod_without_amd_gets_nothing() -> None:
    assignment = PodAssignment("node-a", ((_grant("n", 1, 1, "NVIDIA"),),))
    assert VENDOR.bind_annotations(assignment, bind_time=1) == {}


def test_a_registered_product_type_reads_back_as_amd() -> None:
    value = ";GPU-0,AMD Instinct MI300X,1024,76:;"
    assert VENDOR.decode_assignment(value, init=(True, False)) == (
        (),
        (_grant("GPU-0", 1024, 76),),
    )


@pytest.mark.parametrize(
    "value", ["GPU-0,AMD,1:;", "GPU-0,AMD,x,1:;", "GPU-0,,1,1:;", "GPU-0,AMD,-1,1:;"]
)
def test_corrupt_pod_annotations_are_annotation_errors(value: str) -> None:
    with pytest.raises(AnnotationError):
        VENDOR.decode_assignment(value)


def test_bad_binds_are_annotation_errors() -> None:
    with pytest.raises(AnnotationError):
        VENDOR.bind_annotations(PodAssignment("", ((_grant("g", 1, 1),),)), bind_time=1)
    with pytest.raises(AnnotationError):
        VENDOR.bind_annotations(PodAssignment("n", ((_grant("g,1", 1, 1),),)), bind_time=1)
    with pytest.raises(AnnotationError):
        VENDOR.bind_annotations(PodAssignment("n", ((_grant("g", 1, 1),),)), bind_time=-1)


# -- wording, admission, handshake -------------------------------------------------


def test_words_are_hamis_and_distinct() -> None:
    assert VENDOR.wording.text(Reason.MEMORY) == "CardInsufficientMemory"
    assert VENDOR.wording.text(Reason.NO_DEVICES) == "no gpus"
    assert_words_distinct(VENDOR.wording)


def test_no_handshake_no_admission_rewrite() -> None:
    assert VENDOR.handshake is None
    assert VENDOR.admit(container(limits={"amd.com/gpu": 1}), pod()) is None
    assert VENDOR.admission.count == "amd.com/gpu"
    assert VENDOR.admission.cores is None  # HAMi writes no default percent


def test_amd_is_read_from_its_annotation_not_capacity() -> None:
    assert VENDOR.capacity_keys == ()
    assert VENDOR.node_keys == ("hami.io/node-amd-register",)
    assert VENDOR.decode_capacity(NodeFacts("node-a", capacity={"amd.com/gpu": "8"})) is None


def test_custom_info_scalars_round_trip_as_go_writes_them() -> None:
    value = (
        '[{"id":"g","health":true,"custominfo":{"pciBDF":"0000:03:00.0","ratio":1e-7,'
        '"big":1e21,"whole":2.0,"nested":{"x":1}}}]'
    )
    (device,) = VENDOR.decode_inventory(value)
    assert device.custom_info == (
        ("big", 1e21),
        ("pciBDF", "0000:03:00.0"),
        ("ratio", 1e-7),
        ("whole", 2.0),
    )
    assert VENDOR.encode_inventory((device,)) == (
        '[{"id":"g","type":"amd","health":true,"custominfo":'
        '{"big":1e+21,"pciBDF":"0000:03:00.0","ratio":1e-7,"whole":2}}]'
    )
