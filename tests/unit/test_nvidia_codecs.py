"""HAMi's node inventory and pod device annotations: literals from spec/hami.md sections 3-4,
the captured nodes, byte-exact encoding, corrupt values, and round-trip properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from vgpu_extender.domain import (
    AnnotationError,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
)
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor

NVIDIA = NvidiaVendor()
REGISTER = "hami.io/node-nvidia-register"

# -- inventory: decoding -------------------------------------------------------------

H100_0 = (
    '{"id":"GPU-6e0f2b1c-4d7a-8f93-1b25-c0a4e8d37f21","count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA-NVIDIA H100 80GB HBM3","mode":"hami-core","health":true}'
)
H100_2 = (
    '{"id":"GPU-1c7e5f40-9b2d-a816-e3c7-54f0d29b8a6e","index":2,"count":10,"devmem":81920,'
    '"devcore":100,"type":"NVIDIA-NVIDIA H100 80GB HBM3","numa":1,"mode":"hami-core","health":true}'
)
H100 = "NVIDIA-NVIDIA H100 80GB HBM3"
A4000 = Device(
    "GPU-ca904b47-ae7c-20b9-4be2-bf85f75cbf40", 0, 10, 16376, 100, "NVIDIA-NVIDIA RTX A4000", 0
)

DECODE = [
    (
        "hami-test-literal",
        '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,'
        '"health":true,"index":0,"mode":"hami-core"}]',
        (Device("GPU-0", 0, 10, 8192, 100, "NVIDIA-A100", 0, "hami-core", True),),
    ),
    (
        "readme-node-a-entries",
        f"[{H100_0},{H100_2}]",
        (
            Device("GPU-6e0f2b1c-4d7a-8f93-1b25-c0a4e8d37f21", 0, 10, 81920, 100, H100, 0),
            Device("GPU-1c7e5f40-9b2d-a816-e3c7-54f0d29b8a6e", 2, 10, 81920, 100, H100, 1),
        ),
    ),
    (
        "missing-health-is-unhealthy",
        '[{"id":"GPU-x","count":10,"devmem":100,"devcore":100}]',
        (Device("GPU-x", 0, 10, 100, 100, "", 0, "hami-core", False),),
    ),
    (
        "health-false",
        '[{"id":"GPU-x","count":10,"health":false}]',
        (Device("GPU-x", 0, 10, 0, 0, "", 0, "hami-core", False),),
    ),
    (
        "unknown-keys-and-mig-profiles-ignored",
        '[{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","mode":"mig",'
        '"migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,"sliceCount":1,'
        '"placements":[{"start":0,"size":1}]}],"devicevendor":"nvidia","health":true}]',
        (Device("GPU-m", 0, 7, 40960, 100, "NVIDIA-A100", 0, "mig", True),),
    ),
    ("empty-array", "[]", ()),
    ("json-null", "null", ()),
    ("empty-string", "", ()),
    ("whitespace", "  \n", ()),
    (
        "legacy-issue-110",
        "GPU-ca904b47-ae7c-20b9-4be2-bf85f75cbf40,10,16376,100,NVIDIA-NVIDIA RTX A4000,0,true,0,"
        "hami-core:",
        (A4000,),
    ),
    (
        "legacy-seven-fields",
        "GPU-a,10,16376,100,NVIDIA-T4,1,false:GPU-b,5,8000,200,NVIDIA-T4,0,1:",
        (
            Device("GPU-a", 0, 10, 16376, 100, "NVIDIA-T4", 1, "hami-core", False),
            Device("GPU-b", 0, 5, 8000, 200, "NVIDIA-T4", 0, "hami-core", True),
        ),
    ),
    (
        "legacy-nine-fields-mode",
        "GPU-a,10,100,100,T,0,True,3,mps:",
        (Device("GPU-a", 3, 10, 100, 100, "T", 0, "mps", True),),
    ),
    (
        "legacy-without-final-colon",
        "GPU-a,10,100,100,T,-1,t",
        (Device("GPU-a", 0, 10, 100, 100, "T", -1, "hami-core", True),),
    ),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in DECODE], ids=[c[0] for c in DECODE])
def test_decode_inventory(value: str, expected: tuple[Device, ...]) -> None:
    assert NVIDIA.decode_inventory(value) == expected


def test_decoded_devices_carry_the_configured_vendor_word() -> None:
    vendor = NvidiaVendor(NvidiaConfig(vendor_word="OTHER"))
    (device,) = vendor.decode_inventory('[{"id":"GPU-0","health":true}]')
    assert device.vendor == "OTHER"


def _node_annotations(fixtures_dir: Path) -> list[tuple[str, str]]:
    found = []
    for path in sorted((fixtures_dir / "cluster" / "node").glob("*.yaml")):
        node = yaml.safe_load(path.read_text())
        found.append((f"cluster/{path.stem}", node["metadata"]["annotations"][REGISTER]))
    for path in sorted((fixtures_dir / "nodes").glob("filter-*.json")):
        for node in json.loads(path.read_bytes())["Nodes"]["items"]:
            found.append(
                (
                    f"{path.stem}/{node['metadata']['name']}",
                    node["metadata"]["annotations"][REGISTER],
                )
            )
    return found


def test_captured_node_annotations_round_trip_byte_for_byte(fixtures_dir: Path) -> None:
    annotations = _node_annotations(fixtures_dir)
    assert len(annotations) >= 4
    for where, value in annotations:
        devices = NVIDIA.decode_inventory(value)
        assert len(devices) == 4, where
        assert all(d.healthy and d.count == 10 and d.cores == 100 for d in devices), where
        assert [d.index for d in devices] == [0, 1, 2, 3], where
        assert NVIDIA.encode_inventory(devices) == value, where


def test_captured_node_c_has_its_documented_devices(fixtures_dir: Path) -> None:
    node = yaml.safe_load((fixtures_dir / "cluster" / "node" / "gpu-node-c.yaml").read_text())
    devices = NVIDIA.decode_inventory(node["metadata"]["annotations"][REGISTER])
    assert {(d.type, d.memory_mib, d.numa) for d in devices} == {("NVIDIA-NVIDIA A10", 23028, 0)}


# -- inventory: encoding -------------------------------------------------------------

ENCODE = [
    (
        "hami-test-literal-canonical",
        (Device("GPU-0", 0, 10, 8192, 100, "NVIDIA-A100", 0, "hami-core", True),),
        '[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100",'
        '"mode":"hami-core","health":true}]',
    ),
    (
        "readme-literals",
        (
            Device("GPU-6e0f2b1c-4d7a-8f93-1b25-c0a4e8d37f21", 0, 10, 81920, 100, H100, 0),
            Device("GPU-1c7e5f40-9b2d-a816-e3c7-54f0d29b8a6e", 2, 10, 81920, 100, H100, 1),
        ),
        f"[{H100_0},{H100_2}]",
    ),
    (
        "zeros-and-false-omitted",
        (Device("GPU-z", 0, 0, 0, 0, "", 0, "", False),),
        '[{"id":"GPU-z"}]',
    ),
    (
        "negative-numa-kept",
        (Device("GPU-n", 1, 10, 1, 100, "T", -1, "mps", True),),
        '[{"id":"GPU-n","index":1,"count":10,"devmem":1,"devcore":100,"type":"T","numa":-1,'
        '"mode":"mps","health":true}]',
    ),
    (
        "go-html-escaping-and-raw-utf8",
        (Device("GPU-h", type='A<B>&"C" \u00e9\u2028', healthy=False),),
        '[{"id":"GPU-h","count":10,"devcore":100,'
        '"type":"A\\u003cB\\u003e\\u0026\\"C\\" \u00e9\\u2028","mode":"hami-core"}]',
    ),
    ("no-devices", (), "[]"),
]


@pytest.mark.parametrize(
    ("devices", "expected"), [c[1:] for c in ENCODE], ids=[c[0] for c in ENCODE]
)
def test_encode_inventory_is_byte_exact(devices: tuple[Device, ...], expected: str) -> None:
    assert NVIDIA.encode_inventory(devices) == expected
    assert json.loads(expected) is not None  # still valid JSON


# -- inventory: corrupt values -------------------------------------------------------

INVENTORY_ERRORS = [
    ("not-json", "[{", "not valid JSON"),
    ("top-level-object", '{"id":"GPU-0"}', "JSON array"),
    ("item-not-object", '["GPU-0"]', "device #0: expected a JSON object"),
    ("missing-id", '[{"count":10}]', "device #0: field 'id'"),
    ("id-with-comma", '[{"id":"GPU,0"}]', "'GPU,0'"),
    ("count-as-string", '[{"id":"GPU-0","count":"10"}]', "GPU-0.*'count'.*'10'"),
    ("negative-devmem", '[{"id":"GPU-0","devmem":-5}]', "GPU-0.*'devmem'.*-5"),
    ("devcore-over-int32", '[{"id":"GPU-0","devcore":2147483648}]', "'devcore'.*2147483648"),
    ("float-count", '[{"id":"GPU-0","count":10.5}]', "'count'.*10.5"),
    ("health-as-string", '[{"id":"GPU-0","health":"true"}]', "'health'.*'true'"),
    ("type-not-string", '[{"id":"GPU-0","type":5}]', "'type'.*5"),
    ("negative-index", '[{"id":"GPU-0","index":-1}]', "'index'"),
    ("duplicate-ids", '[{"id":"GPU-0"},{"id":"GPU-0"}]', "'GPU-0' appears more than once"),
    ("legacy-eight-fields", "GPU-a,10,100,100,T,0,true,0:", "7 or 9.*got 8"),
    ("legacy-count-word", "GPU-a,ten,100,100,T,0,true:", "GPU-a.*'count'.*'ten'"),
    ("legacy-health-yes", "GPU-a,10,100,100,T,0,yes:", "GPU-a.*'health'.*'yes'"),
    ("legacy-devmem-overflow", "GPU-a,10,4294967296,100,T,0,true:", "'devmem'.*4294967296"),
    ("legacy-padded-number", "GPU-a,10, 100,100,T,0,true:", "'devmem'.*' 100'"),
    ("legacy-empty-id", ",10,100,100,T,0,true:", "field 'id'"),
    ("legacy-duplicate", "GPU-a,1,1,1,T,0,true:GPU-a,1,1,1,T,0,true:", "more than once"),
    ("plain-garbage", "hello", "7 or 9"),
]


@pytest.mark.parametrize(
    ("value", "message"), [c[1:] for c in INVENTORY_ERRORS], ids=[c[0] for c in INVENTORY_ERRORS]
)
def test_corrupt_inventory_is_a_clear_error(value: str, message: str) -> None:
    with pytest.raises(InventoryError, match=message):
        NVIDIA.decode_inventory(value)


ENCODE_ERRORS = [
    ("empty-uuid", Device(""), "'id'"),
    ("uuid-with-colon", Device("GPU:0"), "'GPU:0'"),
    ("negative-index", Device("GPU-0", index=-1), "index.*-1"),
    ("negative-count", Device("GPU-0", count=-1), "count.*-1"),
    ("memory-over-int32", Device("GPU-0", memory_mib=2**31), "memory_mib"),
]


@pytest.mark.parametrize(
    ("device", "message"), [c[1:] for c in ENCODE_ERRORS], ids=[c[0] for c in ENCODE_ERRORS]
)
def test_unencodable_device_is_a_clear_error(device: Device, message: str) -> None:
    with pytest.raises(InventoryError, match=message):
        NVIDIA.encode_inventory([device])


CORDON = [
    ("two", "GPU-a, GPU-b", frozenset({"GPU-a", "GPU-b"})),
    ("empty", "", frozenset()),
    ("stray-commas", ",GPU-a,,", frozenset({"GPU-a"})),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in CORDON], ids=[c[0] for c in CORDON])
def test_decode_cordon(value: str, expected: frozenset[str]) -> None:
    assert NVIDIA.decode_cordon(value) == expected


# -- pod device annotation -----------------------------------------------------------


def grant(uuid: str, memory: int, cores: int) -> DeviceGrant:
    return DeviceGrant(uuid, memory, cores)


ALLOCATIONS = [
    (
        "devices-test-two-containers",
        "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;"
        "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,NVIDIA,500,3:;",
        (
            (grant("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", 500, 3),),
            (grant("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", 500, 3),),
        ),
    ),
    (
        "one-container-two-gpus",
        "GPU-a,NVIDIA,1000,10:GPU-b,NVIDIA,3000,30:;",
        ((grant("GPU-a", 1000, 10), grant("GPU-b", 3000, 30)),),
    ),
    (
        "container-without-devices-keeps-its-segment",
        ";GPU-a,NVIDIA,2000,0:;;",
        ((), (grant("GPU-a", 2000, 0),), ()),
    ),
    ("single-empty-container", ";", ((),)),
    ("no-containers", "", ()),
]


@pytest.mark.parametrize(
    ("value", "containers"), [c[1:] for c in ALLOCATIONS], ids=[c[0] for c in ALLOCATIONS]
)
def test_allocation_literals_round_trip(
    value: str, containers: tuple[tuple[DeviceGrant, ...], ...]
) -> None:
    assert NVIDIA.decode_assignment(value) == containers
    assignment = PodAssignment("node-1", containers, init=(False,) * len(containers))
    assert NVIDIA.encode_assignment(assignment) == value
    assert NVIDIA.decode_assignment(value, init=assignment.init) == containers


TOLERATED = [
    ("extra-fields", "GPU-a,NVIDIA,1,2,extra:;", ((DeviceGrant("GPU-a", 1, 2),),)),
    ("no-final-semicolon", "GPU-a,NVIDIA,1,2:", ((DeviceGrant("GPU-a", 1, 2),),)),
    ("no-final-colon", "GPU-a,NVIDIA,1,2;", ((DeviceGrant("GPU-a", 1, 2),),)),
    ("surrounding-whitespace", " GPU-a,NVIDIA,1,2:;\n", ((DeviceGrant("GPU-a", 1, 2),),)),
    ("other-vendor-word-kept", "GPU-a,Other,1,2:;", ((DeviceGrant("GPU-a", 1, 2, "Other"),),)),
]


@pytest.mark.parametrize(
    ("value", "containers"), [c[1:] for c in TOLERATED], ids=[c[0] for c in TOLERATED]
)
def test_allocation_decoder_tolerates_harmless_variations(
    value: str, containers: tuple[tuple[DeviceGrant, ...], ...]
) -> None:
    assert NVIDIA.decode_assignment(value) == containers


ALLOCATION_ERRORS = [
    ("three-fields", "GPU-a,NVIDIA,1000:;", {}, "at least 4.*got 3"),
    ("memory-not-number", "GPU-a,NVIDIA,lots,10:;", {}, "memory.*'lots'"),
    ("negative-cores", "GPU-a,NVIDIA,1,-1:;", {}, "cores.*negative"),
    ("cores-overflow", "GPU-a,NVIDIA,1,99999999999:;", {}, "cores.*'99999999999'"),
    ("empty-uuid", ",NVIDIA,1,1:;", {}, "uuid"),
    (
        "uuid-twice-in-container",
        "GPU-a,NVIDIA,1,1:GPU-a,NVIDIA,1,1:;",
        {},
        "'GPU-a' is listed twice",
    ),
    ("second-container-named", "GPU-a,NVIDIA,1,1:;GPU-b,NVIDIA:;", {}, "container #1"),
    (
        "fewer-segments-than-containers",
        "GPU-a,NVIDIA,1,1:;",
        {"init": (True, False)},
        "1 container.*2",
    ),
    ("more-segments-than-containers", ";;;", {"init": (False,)}, "3 container"),
]


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [c[1:] for c in ALLOCATION_ERRORS],
    ids=[c[0] for c in ALLOCATION_ERRORS],
)
def test_corrupt_allocation_is_a_clear_error(
    value: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AnnotationError, match=message) as caught:
        NVIDIA.decode_assignment(value, **kwargs)
    assert caught.value.value is not None


GRANT_ERRORS = [
    ("uuid-with-colon", DeviceGrant("GPU:a", 1, 1), "uuid"),
    ("empty-uuid", DeviceGrant("", 1, 1), "uuid"),
    ("vendor-with-comma", DeviceGrant("GPU-a", 1, 1, "NV,IDIA"), "vendor"),
    ("negative-memory", DeviceGrant("GPU-a", -1, 1), "memory_mib"),
    ("cores-not-int", DeviceGrant("GPU-a", 1, 1.5), "cores"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("bad", "message"), [c[1:] for c in GRANT_ERRORS], ids=[c[0] for c in GRANT_ERRORS]
)
def test_unencodable_grant_is_a_clear_error(bad: DeviceGrant, message: str) -> None:
    assignment = PodAssignment("n", ((), (bad,)))
    with pytest.raises(AnnotationError, match=f"container #1.*{message}"):
        NVIDIA.encode_assignment(assignment)


def test_bind_annotations_are_what_hami_device_plugin_expects() -> None:
    assignment = PodAssignment(
        "gpu-node-b",
        ((grant("GPU-w", 2000, 0),), (grant("GPU-w", 8000, 50),)),
        init=(True, False),
    )
    assert NVIDIA.bind_annotations(assignment, bind_time=1764474610) == {
        "hami.io/vgpu-node": "gpu-node-b",
        "hami.io/vgpu-devices-to-allocate": "GPU-w,NVIDIA,2000,0:;GPU-w,NVIDIA,8000,50:;",
        "hami.io/vgpu-devices-allocated": "GPU-w,NVIDIA,2000,0:;GPU-w,NVIDIA,8000,50:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1764474610",
    }


def test_bind_annotations_follow_renamed_keys() -> None:
    vendor = NvidiaVendor(NvidiaConfig(node_annotation="x/node", bind_time_annotation="x/time"))
    annotations = vendor.bind_annotations(PodAssignment("n", ((),)), bind_time=5)
    assert annotations["x/node"] == "n"
    assert annotations["x/time"] == "5"
    assert "hami.io/vgpu-node" not in annotations


BIND_ERRORS = [
    ("no-node", PodAssignment("", ((),)), 1, "no node"),
    ("negative-time", PodAssignment("n", ((),)), -1, "bind_time"),
    ("bool-time", PodAssignment("n", ((),)), True, "bind_time"),
]


@pytest.mark.parametrize(
    ("assignment", "bind_time", "message"),
    [c[1:] for c in BIND_ERRORS],
    ids=[c[0] for c in BIND_ERRORS],
)
def test_bind_annotations_reject_bad_input(
    assignment: PodAssignment, bind_time: int, message: str
) -> None:
    with pytest.raises(AnnotationError, match=message):
        NVIDIA.bind_annotations(assignment, bind_time=bind_time)


# -- properties ----------------------------------------------------------------------

_UUID = st.text(alphabet="0123456789abcdef-GPU", min_size=1, max_size=40)
_INT32 = st.integers(min_value=0, max_value=2**31 - 1)
# Explicit alphabets: quick to draw, and they still hold what JSON and Go must escape.
_TEXT = st.text(alphabet='aZ09 -_.,:;<>&"\\/\t\n\x00\u00e9\u2028\u4e2d\U0001f600', max_size=30)


@st.composite
def _inventories(draw: st.DrawFn) -> tuple[Device, ...]:
    uuids = draw(st.lists(_UUID, unique=True, max_size=8))
    return tuple(
        Device(
            uuid=uuid,
            index=draw(st.integers(min_value=0, max_value=2**40)),
            count=draw(_INT32),
            memory_mib=draw(_INT32),
            cores=draw(_INT32),
            type=draw(_TEXT),
            numa=draw(st.integers(min_value=-(2**40), max_value=2**40)),
            mode=draw(_TEXT.filter(bool)),
            healthy=draw(st.booleans()),
        )
        for uuid in uuids
    )


@given(_inventories())
def test_inventory_json_round_trip(devices: tuple[Device, ...]) -> None:
    encoded = NVIDIA.encode_inventory(devices)
    assert NVIDIA.decode_inventory(encoded) == devices
    assert NVIDIA.encode_inventory(NVIDIA.decode_inventory(encoded)) == encoded


@given(_inventories())
def test_inventory_legacy_form_reads_like_json(devices: tuple[Device, ...]) -> None:
    legacy = "".join(
        f"{d.uuid},{d.count},{d.memory_mib},{d.cores},{d.type},{d.numa},"
        f"{str(d.healthy).lower()},{d.index},{d.mode}:"
        for d in devices
        if not set(",:").intersection(d.type + d.mode) and d.mode.strip()
    )
    expected = tuple(
        d for d in devices if not set(",:").intersection(d.type + d.mode) and d.mode.strip()
    )
    assert NVIDIA.decode_inventory(legacy) == expected


_GRANT = st.builds(DeviceGrant, _UUID, _INT32, st.integers(min_value=0, max_value=100))
_CONTAINERS = st.lists(
    st.lists(_GRANT, unique_by=lambda g: g.uuid, max_size=4).map(tuple), max_size=6
).map(tuple)


@given(_CONTAINERS)
def test_allocation_round_trip(containers: tuple[tuple[DeviceGrant, ...], ...]) -> None:
    encoded = NVIDIA.encode_assignment(PodAssignment("n", containers))
    assert encoded.count(";") == len(containers)
    init = (False,) * len(containers)
    assert NVIDIA.decode_assignment(encoded, init=init) == containers
