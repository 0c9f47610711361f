"""Kunlunxin: the config section, both backends' requests (vXPU memory rounded to a
quarter, half or whole card), the capacity inventory and the vXPU register literal, the
wing topology (1/2/4/8, tightest wing, cross-wing pairs and quads), the share stages on
devices and a grid (the same-size rule), the webhook rounding, the handshake, the pod
annotations, and hostile input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.kunlun import KunlunConfig, kunlun_vendors
from vgpu_extender.vendors.kunlun.inventory_codec import xpus_from_capacity
from vgpu_extender.vendors.kunlun.request import round_memory
from vgpu_extender.vendors.kunlun.share import VXPU_SHARE, WHOLE_SHARE
from vgpu_extender.vendors.kunlun.topology import pick_xpus

WHOLE, VXPU = kunlun_vendors({})
#: HAMi's kunlun/vdevice_test.go literal.
REGISTER = (
    '[{"id":"xpu-0","index":0,"count":1,"devmem":98304,"devcore":100,"type":"XPU","health":true}]'
)


def test_config_defaults_and_renames() -> None:
    assert KunlunConfig.from_mapping({}) == KunlunConfig(
        "kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"
    )
    whole, vxpu = kunlun_vendors({"resourceVCountName": "k/v"})
    assert whole.resource_names == {"kunlunxin.com/xpu"}
    assert vxpu.resource_names == {"k/v", "kunlunxin.com/vxpu-memory"}
    assert (whole.name, vxpu.name) == ("kunlun", "XPU")
    with pytest.raises(ValueError, match="resourceCoreName"):
        KunlunConfig.from_mapping({"resourceCoreName": "x"})
    with pytest.raises(ValueError, match="resourceCountName"):
        KunlunConfig.from_mapping({"resourceCountName": None or ""})


# -- requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "rounded"),
    [(0, 98304), (1, 24576), (24576, 24576), (24577, 49152), (49153, 98304), (98305, None)],
)
def test_memory_rounds_to_a_quarter_half_or_whole_card(asked: int, rounded: int | None) -> None:
    assert round_memory(asked) == rounded


def test_vxpu_asks() -> None:
    (quarter, whole) = VXPU.parse_pod(
        pod(
            container("a", limits={"kunlunxin.com/vxpu": 1, "kunlunxin.com/vxpu-memory": "20000"}),
            container("b", requests={"kunlunxin.com/vxpu": "2"}),
        )
    ).containers
    assert (quarter.count, quarter.memory_mib, quarter.cores) == (1, 24576, 25)
    assert (whole.count, whole.memory_mib, whole.cores, whole.vendor) == (2, 98304, 100, "XPU")
    with pytest.raises(RequestError):
        VXPU.parse_pod(
            pod(container(limits={"kunlunxin.com/vxpu": 1, "kunlunxin.com/vxpu-memory": "99999"}))
        )


def test_whole_asks_and_both_uuid_pairs() -> None:
    request = WHOLE.parse_pod(
        pod(
            container(limits={"kunlunxin.com/xpu": "4"}),
            annotations={
                "hami.io/use-xpu-uuid": "a,b",
                "baidu.com/use-gpuuuid": "b,c",
                "hami.io/no-use-xpu-uuid": "d",
                "baidu.com/nouse-gpuuuid": "e",
            },
        )
    )
    (ask,) = request.containers
    assert (ask.count, ask.memory_percent, ask.cores, ask.vendor) == (4, 100, 100, "kunlun")
    assert request.selector.use_uuids == ("a", "b", "c")
    assert request.selector.avoid_uuids == ("d", "e")
    with pytest.raises(RequestError):
        WHOLE.parse_pod(pod(container(limits={"kunlunxin.com/xpu": "two"})))


# -- inventory ---------------------------------------------------------------------


def test_whole_xpus_from_capacity() -> None:
    devices = xpus_from_capacity("node-a", {"kunlunxin.com/xpu": "8"})
    assert devices[0] == Device("node-a-kunlun-0", 0, 100, 98304, 100, "kunlun", vendor="kunlun")
    assert [d.numa for d in devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert WHOLE.devices_from_capacity("n", {}) == ()
    assert WHOLE.decode_node(NodeFacts("node-a", annotations={"kunlunxin.com/xpu": "8"})) is None
    with pytest.raises(InventoryError):
        xpus_from_capacity("n", {"kunlunxin.com/xpu": "1.5"})


def test_the_vxpu_register_literal() -> None:
    assert VXPU.decode_node(
        NodeFacts("node-a", annotations={"hami.io/node-register-xpu": REGISTER})
    ) == (Device("xpu-0", 0, 1, 98304, 100, "XPU", 0, "hami-core", True, "XPU"),)
    assert VXPU.decode_node(NodeFacts("node-a", annotations={})) is None
    devices = VXPU.decode_inventory(REGISTER)
    assert VXPU.encode_inventory(devices) == REGISTER.replace('"index":0,', "")
    with pytest.raises(InventoryError):
        VXPU.decode_inventory('[{"id":"xpu-0","count":"one"}]')


# -- topology ----------------------------------------------------------------------


def _node(*indexes: int) -> tuple[Device, ...]:
    return tuple(Device(f"x{i}", i, vendor="kunlun") for i in indexes)


PICKS = [
    ("one in the tighter wing", (0, 1, 2, 4), 1, (4,)),
    ("two in the tighter wing", (0, 1, 2, 4, 5), 2, (4, 5)),
    ("ties go to the lower wing", (0, 1, 4, 5), 2, (0, 1)),
    ("a cross-wing pair", (5, 1), 2, (1, 5)),
    ("no pair", (0, 5), 2, None),
    ("a whole wing", (0, 1, 2, 3, 4, 5), 4, (0, 1, 2, 3)),
    ("a quad", (0, 2, 4, 6, 7), 4, (0, 2, 4, 6)),
    ("no quad", (0, 1, 2, 4, 7), 4, None),
    ("all eight", (7, 6, 5, 4, 3, 2, 1, 0), 8, (0, 1, 2, 3, 4, 5, 6, 7)),
    ("three is not allowed", (0, 1, 2, 3), 3, None),
    ("too few", (0,), 2, None),
]


@pytest.mark.parametrize(("case", "indexes", "count", "want"), PICKS, ids=[p[0] for p in PICKS])
def test_graph_select(
    case: str, indexes: tuple[int, ...], count: int, want: tuple[int, ...] | None
) -> None:
    fitting = _node(*indexes)
    chosen = pick_xpus(fitting, count)
    assert (None if chosen is None else tuple(fitting[p].index for p in chosen)) == want


def test_both_backends_pick_by_wings_and_may_refuse() -> None:
    assert WHOLE_SHARE.pick is pick_xpus and WHOLE_SHARE.pick_refuses
    assert VXPU_SHARE.pick is pick_xpus and VXPU_SHARE.pick_refuses


# -- share -------------------------------------------------------------------------


def _vxpu(memory: int) -> ContainerRequest:
    return ContainerRequest("c", count=1, memory_mib=memory, cores=memory * 100 // 98304)


SHARES = [
    ("quarter on empty", (4, 98304, 100), (0, 0, 0), _vxpu(24576), None),
    ("quarter beside quarters", (4, 98304, 100), (2, 49152, 50), _vxpu(24576), None),
    ("half beside a quarter", (4, 98304, 100), (1, 24576, 25), _vxpu(49152), Reason.EXCLUSIVE),
    ("half beside a half", (4, 98304, 100), (1, 49152, 50), _vxpu(49152), None),
    ("memory before size", (4, 98304, 100), (1, 49152, 50), _vxpu(98304), Reason.MEMORY),
    ("slots", (1, 98304, 100), (1, 24576, 25), _vxpu(24576), Reason.SLOTS),
]


@pytest.mark.parametrize(
    ("case", "total", "used", "ask", "want"), SHARES, ids=[c[0] for c in SHARES]
)
def test_vxpu_stages(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    assert verdict(VXPU_SHARE, total, used, ask) == want


@pytest.mark.parametrize("ask", sorted({c[3] for c in SHARES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    cells = [(c[1], c[2]) for c in SHARES]
    assert grid_verdicts(VXPU_SHARE, cells, ask) == [
        verdict(VXPU_SHARE, t, u, ask) for t, u in cells
    ]


def test_a_held_pod_of_two_quarters_passes_beside_quarters() -> None:
    held = VXPU_SHARE.held(DeviceUsage(memory_mib=49152, cores=50, slots=2))
    assert verdict(VXPU_SHARE, (4, 98304, 100), (1, 24576, 25), held) is None  # type: ignore[arg-type]
    assert verdict(VXPU_SHARE, (4, 98304, 100), (1, 49152, 50), held) is Reason.EXCLUSIVE  # type: ignore[arg-type]


def test_a_whole_xpu_is_alone() -> None:
    whole = ContainerRequest("c", count=1, memory_percent=100, cores=100)
    assert verdict(WHOLE_SHARE, (100, 98304, 100), (0, 0, 0), whole) is None
    assert verdict(WHOLE_SHARE, (100, 98304, 100), (1, 98304, 100), whole) is Reason.EXCLUSIVE


# -- admission and handshake -------------------------------------------------------


def test_the_webhook_rounds_memory_in_limits_and_requests() -> None:
    found = VXPU.admit(
        container(
            limits={"kunlunxin.com/vxpu": 1, "kunlunxin.com/vxpu-memory": "30000"},
            requests={"kunlunxin.com/vxpu-memory": "49152"},
        ),
        pod(),
    )
    assert found is not None and found.uses
    assert dict(found.limits) == {"kunlunxin.com/vxpu-memory": "49152"}
    assert dict(found.requests) == {}
    assert VXPU.admit(container(limits={"kunlunxin.com/vxpu": 1}), pod()) is None
    with pytest.raises(RequestError):
        VXPU.admit(container(limits={"kunlunxin.com/vxpu-memory": "100000"}), pod())


NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_the_vxpu_handshake() -> None:
    handshake = VXPU.handshake
    assert handshake is not None and WHOLE.handshake is None
    assert handshake.annotation == "hami.io/node-handshake-xpu"
    assert handshake.resource == "kunlunxin.com/vxpu"
    registered = {"hami.io/node-register-xpu": REGISTER}
    assert handshake.check({}, NOW, lambda: 0) is None
    reported = handshake.check(
        {**registered, "hami.io/node-handshake-xpu": "Reported_2026.01.02 03:04:00"}, NOW, lambda: 0
    )
    assert reported is not None and reported.healthy
    assert reported.write == "Requesting_2026-01-02 03:04:05"
    late = {**registered, "hami.io/node-handshake-xpu": "Requesting_2026-01-02 03:02:00"}
    silent = handshake.check(late, NOW, lambda: 0)
    assert silent is not None and not silent.healthy and "kunlunxin.com/vxpu" in silent.why
    advertising = handshake.check(late, NOW, lambda: 4)
    assert advertising is not None and advertising.healthy
    fresh = {**registered, "hami.io/node-handshake-xpu": "Requesting_2026-01-02 03:04:00"}
    waiting = handshake.check(fresh, NOW, lambda: 0)
    assert waiting is not None and waiting.healthy and waiting.write is None
    assert waiting.recheck_at == NOW + timedelta(seconds=56)
    deleted = {**registered, "hami.io/node-handshake-xpu": "Deleted_2025-03-31 11:19:29"}
    gone = handshake.check(deleted, NOW, lambda: 8)
    assert gone is not None and not gone.healthy


# -- pod annotations ---------------------------------------------------------------


def test_whole_bind_annotations_last_container_wins() -> None:
    def grant(i: int) -> DeviceGrant:
        return DeviceGrant(f"node-a-kunlun-{i}", 98304, 100, "kunlun")

    assignment = PodAssignment("node-a", ((grant(0),), (grant(4), grant(5)), ()))
    annotations = WHOLE.bind_annotations(assignment, bind_time=1700000000)
    assert annotations == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/kunlun-allocated": (
            "node-a-kunlun-0,kunlun,98304,100:;"
            "node-a-kunlun-4,kunlun,98304,100:node-a-kunlun-5,kunlun,98304,100:;;"
        ),
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "BAIDU_COM_DEVICE_IDX": "4,5",
    }
    assert WHOLE.names.node_lock is None
    with pytest.raises(AnnotationError):
        WHOLE.bind_annotations(
            PodAssignment("n", ((DeviceGrant("xpu-0", 1, 1, "kunlun"),),)), bind_time=1
        )


def test_vxpu_bind_annotations() -> None:
    assignment = PodAssignment("node-a", ((DeviceGrant("xpu-0", 24576, 25, "XPU"),),))
    annotations = VXPU.bind_annotations(assignment, bind_time=7)
    assert annotations["hami.io/xpu-devices-to-allocate"] == "xpu-0,XPU,24576,25:;"
    assert annotations["hami.io/xpu-devices-allocated"] == "xpu-0,XPU,24576,25:;"
    assert VXPU.assignment_annotation == "hami.io/xpu-devices-allocated"
    assert VXPU.names.node_lock == "hami.io/mutex.lock"


def test_words() -> None:
    assert VXPU.wording.text(Reason.COMBINATION) == "AllocatedCardsInsufficientRequest"
    assert_words_distinct(WHOLE.wording)


def test_whole_xpus_through_the_capacity_seam() -> None:
    assert WHOLE.capacity_keys == ("kunlunxin.com/xpu",) and WHOLE.node_keys == ()
    devices = WHOLE.decode_capacity(NodeFacts("node-a", capacity={"kunlunxin.com/xpu": "8"}))
    assert devices is not None and [d.uuid for d in devices][-1] == "node-a-kunlun-7"
    assert WHOLE.decode_capacity(NodeFacts("node-a", capacity={"kunlunxin.com/xpu": "0"})) is None
    assert (
        VXPU.capacity_keys == ()
        and VXPU.decode_capacity(NodeFacts("n", capacity={"kunlunxin.com/xpu": "8"})) is None
    )
    with pytest.raises(InventoryError):
        WHOLE.decode_capacity(NodeFacts("node-a", capacity={"kunlunxin.com/xpu": "many"}))
