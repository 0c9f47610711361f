"""Enflame: the config section, profiles (HAMi's names, core percents, matching), both
backends' requests, the DRS capacity literal and the capacity inventory, the share
stages on devices and a grid, the webhook rule, HAMi's PatchAnnotations literal
(``",20480,50"`` and request size 3 for ``3g.20gb``), and hostile input."""

from __future__ import annotations

import json

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
    InventoryError,
    PodAssignment,
    PodRequest,
    Reason,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.enflame import EnflameConfig, enflame_vendors
from vgpu_extender.vendors.enflame.config import DEFAULT_PROFILES
from vgpu_extender.vendors.enflame.inventory_codec import drs_devices, gcus_from_capacity
from vgpu_extender.vendors.enflame.profiles import Profile, by_spec, parse_name, profiles_of
from vgpu_extender.vendors.enflame.request import NO_PROFILE
from vgpu_extender.vendors.enflame.share import DRS_SHARE, GCU_SHARE

GCU, DRS = enflame_vendors({})
#: HAMi's enflame test literal.
DRS_LITERAL = (
    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
)


def test_config_defaults_renames_and_the_legacy_name() -> None:
    config = EnflameConfig.from_mapping({})
    assert (config.gcu_resource, config.drs_resource) == ("enflame.com/gcu", "enflame.com/drs-gcu")
    assert (config.memory_resource, config.core_resource) == (
        "enflame.com/gcu-memory",
        "enflame.com/gcu-core",
    )
    assert EnflameConfig.from_mapping({"resourceNameVGCU": "e/v"}).drs_resource == "e/v"
    both = EnflameConfig.from_mapping({"resourceNameVGCU": "e/v", "resourceNameDRSGCU": "e/d"})
    assert both.drs_resource == "e/d"
    custom = EnflameConfig.from_mapping({"drsProfiles": {"2g.10gb": 5, "4g.20gb": "6"}})
    assert [(p.name, p.id, p.core_percent) for p in custom.profiles] == [
        ("2g.10gb", "5", 50),
        ("4g.20gb", "6", 100),
    ]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"resourceNameGPU": "x"}, "resourceNameGPU"),
        ({"resourceNameGCU": ""}, "resourceNameGCU"),
        ({"drsProfiles": ["1g.6gb"]}, "drsProfiles"),
        ({"drsProfiles": {"big": "0"}}, "drsProfiles"),
    ],
    ids=["unknown key", "empty name", "profiles not a map", "no valid profile"],
)
def test_bad_settings_name_the_key(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        EnflameConfig.from_mapping(settings)


# -- profiles ----------------------------------------------------------------------


def test_the_plugins_profiles() -> None:
    assert (
        Profile("1g.6gb", "0", 1, 6, 17),
        Profile("3g.20gb", "1", 3, 20, 50),
        Profile("6g.40gb", "2", 6, 40, 100),
    ) == DEFAULT_PROFILES
    assert parse_name("3g.20gb") == (3, 20)
    assert parse_name("3g20gb") is None
    assert [p.name for p in profiles_of({"x": "9", "2g.8gb": "1"})] == ["2g.8gb"]


SPECS = [
    ("memory in GB", 10, 0, "3g.20gb"),
    ("exact GB", 20, 0, "3g.20gb"),
    ("MiB over twice the largest GB", 20480, 0, "3g.20gb"),
    ("80 is GB: refused", 80, 0, None),
    ("81 is MiB: one GB", 81, 0, "1g.6gb"),
    ("cores", 0, 51, "6g.40gb"),
    ("memory and cores", 6, 40, "3g.20gb"),
    ("too much", 41, 0, None),
]


@pytest.mark.parametrize(("case", "memory", "cores", "want"), SPECS, ids=[c[0] for c in SPECS])
def test_profile_by_memory_and_cores(case: str, memory: int, cores: int, want: str | None) -> None:
    found = by_spec(DEFAULT_PROFILES, memory, cores)
    assert (None if found is None else found.name) == want


# -- requests ----------------------------------------------------------------------


REQUESTS = [
    ("slices", {"enflame.com/drs-gcu": "3"}, (1, 20480, 50, "")),
    ("slices that are no profile", {"enflame.com/drs-gcu": "2"}, (1, 0, 0, NO_PROFILE)),
    ("memory", {"enflame.com/gcu-memory": "6"}, (1, 6144, 17, "")),
    ("core", {"enflame.com/gcu-core": "100"}, (1, 40960, 100, "")),
    (
        "0 slices falls to memory",
        {"enflame.com/drs-gcu": 0, "enflame.com/gcu-memory": 7},
        (1, 20480, 50, ""),
    ),
    ("nothing", {"enflame.com/gcu": "1"}, (0, 0, 0, "")),
]


@pytest.mark.parametrize(("case", "limits", "want"), REQUESTS, ids=[c[0] for c in REQUESTS])
def test_drs_requests(
    case: str, limits: dict[str, object], want: tuple[int, int, int, str]
) -> None:
    (ask,) = DRS.parse_pod(pod(container(requests=limits))).containers
    assert (ask.count, ask.memory_mib, ask.cores, ask.mode) == want
    assert ask.vendor == "Enflame"


def test_whole_gcus_and_the_uuid_selector() -> None:
    request = GCU.parse_pod(pod(container(limits={"enflame.com/gcu": 2})))
    (ask,) = request.containers
    assert (ask.count, ask.memory_percent, ask.cores, ask.vendor) == (2, 100, 100, "GCU")
    selector = DRS.parse_pod(
        pod(annotations={"enflame.com/use-gpuuuid": "a", "enflame.com/nouse-gpuuuid": "b,c"})
    ).selector
    assert (selector.use_uuids, selector.avoid_uuids) == (("a",), ("b", "c"))


@pytest.mark.parametrize(
    ("backend", "limits"),
    [
        ("drs", {"enflame.com/drs-gcu": "1.5"}),
        ("drs", {"enflame.com/gcu-memory": "-1"}),
        ("drs", {"enflame.com/gcu-core": "x"}),
        ("gcu", {"enflame.com/gcu": "x"}),
    ],
    ids=["fraction of slices", "negative memory", "garbage core", "garbage count"],
)
def test_malformed_values_are_request_errors(backend: str, limits: dict[str, object]) -> None:
    vendor = DRS if backend == "drs" else GCU
    with pytest.raises(RequestError):
        vendor.parse_pod(pod(container(limits=limits)))


# -- inventory ---------------------------------------------------------------------


def test_the_drs_capacity_literal() -> None:
    assert drs_devices("node-a", DRS_LITERAL) == (
        Device(
            "node-a-enflame-drs-0",
            0,
            6,
            40960,
            100,
            "Enflame",
            vendor="Enflame",
            custom_info=(("index", "0"), ("maxSlice", 6), ("minor", "0")),
        ),
    )


def test_drs_devices_are_decoded_from_the_node_annotation_with_the_node_name() -> None:
    """HAMi's literal on two nodes: the device IDs carry each node's name, so the same
    annotation on another node is other devices."""
    annotations = {"enflame.com/gcu-drs-capacity": DRS_LITERAL}
    assert DRS.node_keys == ("enflame.com/gcu-drs-capacity",)
    (on_a,) = DRS.decode_node(NodeFacts("node-a", annotations=annotations)) or ()
    (on_b,) = DRS.decode_node(NodeFacts("node-b", annotations=annotations)) or ()
    assert (on_a.uuid, on_b.uuid) == ("node-a-enflame-drs-0", "node-b-enflame-drs-0")
    assert (on_a.count, on_a.memory_mib, on_a.cores) == (6, 40960, 100)
    assert DRS.decode_node(NodeFacts("node-a")) is None
    assert GCU.decode_node(NodeFacts("node-a", annotations=annotations)) is None
    with pytest.raises(InventoryError, match="gcu-drs-capacity"):
        DRS.decode_node(NodeFacts("node-a", annotations={"enflame.com/gcu-drs-capacity": "{"}))


def test_drs_capacity_as_a_string_a_bad_index_and_no_minor() -> None:
    value = json.dumps(
        {"devices": [{"index": "x", "capacity": "4"}], "profiles": {"1g.6gb": "0", "4g.24gb": "1"}}
    )
    (device,) = drs_devices("n", value)
    assert (device.uuid, device.count, device.memory_mib) == ("n-enflame-drs-0", 4, 24576)
    assert device.custom("minor") == "0" and device.custom("maxSlice") == 4


@pytest.mark.parametrize(
    "value",
    [
        "",
        "[]",
        "{}",
        '{"devices":[],"profiles":{"1g.6gb":"0"}}',
        '{"devices":[{"capacity":6}],"profiles":{"big":"0"}}',
        '{"devices":[{"capacity":0}],"profiles":{"1g.6gb":"0"}}',
        '{"devices":[{"capacity":true}],"profiles":{"1g.6gb":"0"}}',
        '{"devices":[1],"profiles":{"1g.6gb":"0"}}',
        # A Unicode digit str.isdigit takes and int refuses; past int's 4,300 digits.
        '{"devices":[{"capacity":"\u00b2"}],"profiles":{"1g.6gb":"0"}}',
        '{"devices":[{"capacity":"' + "9" * 5000 + '"}],"profiles":{"1g.6gb":"0"}}',
        # A profile no device can be: its memory would overflow every field.
        '{"devices":[{"capacity":6}],"profiles":{"1g.99999999999999999999gb":"0"}}',
        # One index twice: one device id twice.
        '{"devices":[{"index":"0","capacity":6},{"index":"0","capacity":6}],'
        '"profiles":{"1g.6gb":"0"}}',
        # More devices than a node may have.
        json.dumps({"devices": [{"capacity": 6}] * 300, "profiles": {"1g.6gb": "0"}}),
    ],
    ids=[
        "empty",
        "array",
        "object",
        "no-devices",
        "no-profile",
        "zero-capacity",
        "bool-capacity",
        "device-not-object",
        "unicode-digit",
        "5000-digits",
        "huge-profile",
        "duplicate-index",
        "300-devices",
    ],
)
def test_hostile_drs_capacities(value: str) -> None:
    with pytest.raises(InventoryError):
        drs_devices("n", value)


@pytest.mark.parametrize(
    "index", ["\u00b2", "9" * 5000, "-1"], ids=["unicode-digit", "5000-digits", "negative"]
)
def test_an_unreadable_drs_index_is_the_position(index: str) -> None:
    value = json.dumps({"devices": [{"index": index, "capacity": 6}], "profiles": {"1g.6gb": "0"}})
    (device,) = drs_devices("n", value)
    assert (device.uuid, device.index) == ("n-enflame-drs-0", 0)


def test_whole_gcus_from_capacity() -> None:
    assert gcus_from_capacity("node-a", {"enflame.com/gcu": "2"}) == (
        Device("node-a-GCU-0", 0, 1, 100, 100, "GCU", vendor="GCU"),
        Device("node-a-GCU-1", 1, 1, 100, 100, "GCU", vendor="GCU"),
    )
    assert GCU.devices_from_capacity("n", {"enflame.com/gcu": "1"})[0].uuid == "n-GCU-0"
    with pytest.raises(InventoryError):
        gcus_from_capacity("n", {"enflame.com/gcu": "-2"})


# -- share -------------------------------------------------------------------------


def _profile(memory: int, cores: int) -> ContainerRequest:
    return ContainerRequest("c", count=1, memory_mib=memory, cores=cores)


SHARES = [
    ("3g on an empty GCU", (6, 40960, 100), (0, 0, 0), _profile(20480, 50), None),
    ("a second 3g", (6, 40960, 100), (1, 20480, 50), _profile(20480, 50), None),
    ("6g on a used GCU", (6, 40960, 100), (1, 6144, 17), _profile(40960, 100), Reason.MEMORY),
    ("fifth 1g after four", (6, 40960, 100), (4, 24576, 68), _profile(6144, 17), None),
    ("sixth 1g: cores", (6, 40960, 100), (5, 30720, 85), _profile(6144, 17), Reason.CORES),
    ("all slices used", (2, 40960, 100), (2, 12288, 34), _profile(6144, 17), Reason.SLOTS),
]


@pytest.mark.parametrize(
    ("case", "total", "used", "ask", "want"), SHARES, ids=[c[0] for c in SHARES]
)
def test_drs_stages(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    assert verdict(DRS_SHARE, total, used, ask) == want


@pytest.mark.parametrize("ask", sorted({c[3] for c in SHARES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    cells = [(c[1], c[2]) for c in SHARES]
    assert grid_verdicts(DRS_SHARE, cells, ask) == [verdict(DRS_SHARE, t, u, ask) for t, u in cells]


def test_a_whole_gcu_is_exclusive() -> None:
    whole = ContainerRequest("c", count=1, memory_percent=100, cores=100)
    assert verdict(GCU_SHARE, (1, 100, 100), (0, 0, 0), whole) is None
    assert verdict(GCU_SHARE, (1, 100, 100), (1, 100, 100), whole) is Reason.SLOTS
    assert verdict(GCU_SHARE, (2, 100, 100), (1, 0, 0), whole) is Reason.EXCLUSIVE


# -- admission ---------------------------------------------------------------------


def test_the_webhook_copies_asks_between_limits_and_requests() -> None:
    found = DRS.admit(container(requests={"enflame.com/drs-gcu": "3"}), pod())
    assert found is not None and found.uses
    assert (dict(found.limits), dict(found.requests)) == ({"enflame.com/drs-gcu": "3"}, {})
    spec = DRS.admit(
        container(limits={"enflame.com/gcu-memory": "20"}, requests={"enflame.com/gcu-core": 50}),
        pod(),
    )
    assert spec is not None
    assert dict(spec.limits) == {"enflame.com/gcu-core": "50"}
    assert dict(spec.requests) == {"enflame.com/gcu-memory": "20"}
    assert DRS.admit(container(limits={"cpu": "1"}), pod()) is None


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"enflame.com/drs-gcu": "0"}, "enflame.com/drs-gcu must be greater than 0"),
        ({"enflame.com/gcu-memory": "0"}, "enflame.com/gcu-memory must be greater than 0"),
        ({"enflame.com/gcu-core": "101"}, r"enflame.com/gcu-core must be in range \(0,100\]"),
        ({"enflame.com/gcu-core": "0"}, r"enflame.com/gcu-core must be in range \(0,100\]"),
    ],
    ids=["no slices", "no memory", "core over 100", "core 0"],
)
def test_the_webhook_refuses_with_hamis_text(limits: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError, match=f"^{message}$"):
        DRS.admit(container(limits=limits), pod())


# -- pod annotations ---------------------------------------------------------------


def _request(*names: str) -> PodRequest:
    return PodRequest("u", containers=tuple(ContainerRequest(n) for n in names))


def test_hamis_drs_patch_annotations() -> None:
    grant = DeviceGrant("node-a-enflame-drs-0", 20480, 50, "Enflame")
    assignment = PodAssignment(
        "node-a", ((), (grant,), (DeviceGrant("node-a-enflame-drs-1", 6144, 17, "Enflame"),))
    )
    annotations = DRS.bind_annotations(
        assignment, bind_time=1700000000, request=_request("init", "main", "side")
    )
    assert ",20480,50" in annotations["hami.io/enflame-vgpu-devices-allocated"]
    assert annotations == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/enflame-vgpu-devices-allocated": (
            ";node-a-enflame-drs-0,Enflame,20480,50:;node-a-enflame-drs-1,Enflame,6144,17:;"
        ),
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "enflame.com/gcu-assigned": "false",
        "enflame.com/gcu-assigned-time": "1700000000000000000",
        "enflame.com/gcu-assigned-index": "0",
        "enflame.com/gcu-assigned-id": "0",
        "enflame.com/gcu-assigned-minor": "0",
        "enflame.com/gcu-request-size": "3",
        "assigned-containers": (
            '{"main":{"allocated":false,"request":3,"profileID":"1","profileName":"3g.20gb"},'
            '"side":{"allocated":false,"request":1,"profileID":"0","profileName":"1g.6gb"}}'
        ),
    }
    assert "hami.io/enflame-vgpu-devices-to-allocate" not in annotations
    assert DRS.names.node_lock is None and GCU.names.node_lock is None


def test_gcu_bind_annotations() -> None:
    assignment = PodAssignment("n", ((DeviceGrant("n-GCU-0", 100, 100, "GCU"),),))
    annotations = GCU.bind_annotations(assignment, bind_time=5)
    assert annotations["hami.io/enflame-gcu-devices-to-allocate"] == "n-GCU-0,GCU,100,100:;"
    assert annotations["hami.io/enflame-gcu-devices-allocated"] == "n-GCU-0,GCU,100,100:;"


@pytest.mark.parametrize(
    "grant",
    [
        DeviceGrant("n-enflame-drs-0", 1000, 50, "Enflame"),
        DeviceGrant("n-gcu-0", 20480, 50, "Enflame"),
    ],
    ids=["no profile", "not a drs id"],
)
def test_a_grant_that_is_no_drs_share_is_an_annotation_error(grant: DeviceGrant) -> None:
    with pytest.raises(AnnotationError):
        DRS.bind_annotations(PodAssignment("n", ((grant,),)), bind_time=1)


def test_words() -> None:
    assert DRS.wording.text(Reason.MODE_MISMATCH) == "ModeNotFit"
    assert DRS.wording.text(Reason.NO_DEVICES) == "no gcus"
    assert_words_distinct(DRS.wording)


def test_whole_gcus_through_the_capacity_seam() -> None:
    assert GCU.capacity_keys == ("enflame.com/gcu",) and GCU.node_keys == ()
    (device,) = GCU.decode_capacity(NodeFacts("node-a", capacity={"enflame.com/gcu": "1"})) or ()
    assert device.uuid == "node-a-GCU-0"
    assert GCU.decode_capacity(NodeFacts("node-a", capacity={})) is None
    # DRS is read from its annotation, not from capacity.
    assert DRS.capacity_keys == ()
    assert DRS.decode_capacity(NodeFacts("node-a", capacity={"enflame.com/gcu": "1"})) is None
