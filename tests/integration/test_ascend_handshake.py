"""The scheduler's side of the Ascend node handshake (``hami.io/node-handshake-<CW>``),
against the test API server with the real Kubernetes client: a device plugin's report
is answered with ``Requesting_<time>`` (UTC wall time, HAMi's layout), a request
unanswered for 60 s on a node that advertises no NPUs of the chip leaves that chip's
NPUs there unhealthy (the node's GPUs stay usable), a node that still advertises some
stays usable, HAMi v2.8/v2.9's ``Deleted_…`` is a chip not registered, a node without
the chip gets no handshake, and standalone nothing is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.support.apiserver import FakeApiServer
from tests.support.server import node_json
from tests.support.waiting import eventually
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.sync import SyncService, node_view
from vgpu_extender.vendors import create_vendor_set

NODE = "npu-1"
CW = "Ascend910B3"
HANDSHAKE = f"hami.io/node-handshake-{CW}"
REGISTER = f"hami.io/node-register-{CW}"
#: The fake clock's start: 10:00:01 UTC, written as HAMi writes local time.
START = datetime(2026, 8, 21, 10, 0, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _register(chips: int = 8) -> str:
    return json.dumps(
        [
            {
                "id": f"die-{i}",
                "index": i,
                "count": 4,
                "devmem": 65536,
                "devcore": 20,
                "type": CW,
                "health": True,
                "custominfo": {"NetworkID": 0 if i < 4 else 1},
            }
            for i in range(chips)
        ]
    )


def _node(
    handshake: str | None, *, allocatable: str | None = None, npus: bool = True
) -> dict[str, Any]:
    """A node with two GPUs (HAMi's NVIDIA registration) and, with ``npus``, eight 910B3
    NPUs as the Ascend plugin registers them."""
    node = node_json(NODE, gpus=2)
    annotations = node["metadata"]["annotations"]
    if npus:
        annotations[REGISTER] = _register()
    if handshake is not None:
        annotations[HANDSHAKE] = handshake
    if allocatable is not None:
        node["status"] = {"allocatable": {f"huawei.com/{CW}": allocatable}}
    return node


@dataclass
class Setup:
    apiserver: FakeApiServer
    kube: RealKubeClient
    cluster: ClusterState
    inventory: InventoryService
    clock: Clock

    def observe(self) -> None:
        self.inventory.observe([node_view(self.kube.get_node(NODE) or {})])

    def annotation(self) -> str | None:
        value: str | None = self.apiserver.get_node(NODE)["metadata"]["annotations"].get(HANDSHAKE)
        return value

    def health(self) -> dict[str, set[bool]]:
        """Each vendor's device health on the node, as the index has it."""
        found: dict[str, set[bool]] = {}
        with self.cluster.lock:
            for device in self.cluster.index.inventory(NODE).devices:
                found.setdefault(device.vendor, set()).add(device.healthy)
        return found

    def report(self, value: str) -> None:
        """The device plugin writes its side of the handshake."""
        self.apiserver.cluster.patch(
            "nodes", "", NODE, {"metadata": {"annotations": {HANDSHAKE: value}}}
        )


@pytest.fixture
def setup(
    apiserver: FakeApiServer, real_kube: RealKubeClient, sessions: sessionmaker[Session]
) -> Iterator[Setup]:
    clock = Clock()
    cluster = ClusterState(vendor=create_vendor_set("nvidia,ascend"))
    inventory = InventoryService(
        cluster=cluster, sessions=sessions, split_count=10, clock=clock, kube=real_kube
    )
    yield Setup(apiserver, real_kube, cluster, inventory, clock)
    inventory.stop()


HEALTHY = {"NVIDIA": {True}, CW: {True}}
NPUS_OFF = {"NVIDIA": {True}, CW: {False}}


@pytest.mark.parametrize(
    "reported",
    ["Reported_2026.08.21 09:59:50", "", "Reported 2026-08-21 09:59:50.1 +0000 UTC", None],
    ids=["plugin", "empty", "go-time-string", "none"],
)
def test_a_report_is_answered_with_a_request(setup: Setup, reported: str | None) -> None:
    setup.apiserver.add_node(_node(reported))
    setup.observe()
    assert setup.annotation() == "Requesting_2026-08-21 10:00:01"
    assert setup.health() == HEALTHY
    # The answer is awaited: looked at again once the 60 s are over.
    assert setup.inventory.rechecks_due() == {NODE: START + timedelta(seconds=61)}


def test_a_plugin_that_keeps_answering_keeps_moving_the_look_on(setup: Setup) -> None:
    setup.apiserver.add_node(_node("Reported_2026.08.21 10:00:00"))
    setup.observe()
    setup.clock.now = START + timedelta(seconds=30)
    setup.report("Reported_2026.08.21 10:00:30")
    setup.observe()
    assert setup.annotation() == "Requesting_2026-08-21 10:00:31"
    assert setup.inventory.rechecks_due() == {NODE: START + timedelta(seconds=91)}
    # The node loses the chip: no look is due any more.
    setup.apiserver.cluster.patch(
        "nodes", "", NODE, {"metadata": {"annotations": {REGISTER: None, HANDSHAKE: None}}}
    )
    setup.observe()
    assert setup.inventory.rechecks_due() == {}


def test_a_fresh_request_is_awaited_untouched(setup: Setup) -> None:
    setup.apiserver.add_node(_node("Requesting_2026-08-21 09:59:31"))
    setup.observe()
    assert setup.annotation() == "Requesting_2026-08-21 09:59:31"
    assert setup.health() == HEALTHY


@pytest.mark.parametrize("allocatable", [None, "0"], ids=["absent", "zero"])
def test_an_unanswered_request_leaves_the_chips_npus_unusable(
    setup: Setup, allocatable: str | None
) -> None:
    setup.apiserver.add_node(_node("Requesting_2026-08-21 09:59:00", allocatable=allocatable))
    setup.observe()
    assert setup.health() == NPUS_OFF  # the node's GPUs are not the plugin's
    assert setup.annotation() == "Requesting_2026-08-21 09:59:00"  # nothing written
    # The plugin comes back: its report is answered and the NPUs are usable again.
    setup.clock.now = START + timedelta(seconds=5)
    setup.report("Reported_2026.08.21 10:00:05")
    setup.observe()
    assert setup.health() == HEALTHY
    assert setup.annotation() == "Requesting_2026-08-21 10:00:06"


def test_a_silent_node_that_still_advertises_npus_stays_usable(setup: Setup) -> None:
    setup.apiserver.add_node(_node("Requesting_2026-08-21 09:00:00", allocatable="32"))
    setup.observe()
    assert setup.health() == HEALTHY
    assert setup.annotation() == "Requesting_2026-08-21 09:00:00"


def test_time_alone_turns_an_awaited_request_stale(setup: Setup) -> None:
    setup.apiserver.add_node(_node("Reported_2026.08.21 10:00:00"))
    setup.observe()
    assert setup.health() == HEALTHY
    due = setup.inventory.rechecks_due()[NODE]
    # Nothing on the node changes; the look when due finds the request unanswered.
    setup.clock.now = due
    setup.inventory.recheck(NODE)
    assert setup.health() == NPUS_OFF
    assert setup.annotation() == "Requesting_2026-08-21 10:00:01"


def test_hami_v28_deleted_is_a_chip_not_registered(setup: Setup) -> None:
    setup.apiserver.add_node(_node("Deleted_2025-03-31 11:19:29", allocatable="32"))
    setup.observe()
    assert setup.health() == NPUS_OFF
    assert setup.annotation() == "Deleted_2025-03-31 11:19:29"


def test_a_node_without_the_chip_gets_no_handshake(setup: Setup) -> None:
    setup.apiserver.add_node(_node(None, npus=False))
    setup.observe()
    annotations = setup.apiserver.get_node(NODE)["metadata"]["annotations"]
    assert not [key for key in annotations if key.startswith("hami.io/node-handshake-")]
    assert setup.health() == {"NVIDIA": {True}}


def test_standalone_nothing_is_written_and_the_npus_stay_usable(
    apiserver: FakeApiServer, real_kube: RealKubeClient, sessions: sessionmaker[Session]
) -> None:
    cluster = ClusterState(vendor=create_vendor_set("nvidia,ascend"))
    inventory = InventoryService(cluster=cluster, sessions=sessions, split_count=10)
    try:
        apiserver.add_node(_node("Requesting_2020-01-01 00:00:00"))
        inventory.observe([node_view(real_kube.get_node(NODE) or {})])
        assert apiserver.get_node(NODE)["metadata"]["annotations"][HANDSHAKE] == (
            "Requesting_2020-01-01 00:00:00"
        )
        with cluster.lock:
            assert all(d.healthy for d in cluster.index.inventory(NODE).devices)
    finally:
        inventory.stop()


def test_the_node_watch_answers_each_report(setup: Setup, sessions: sessionmaker[Session]) -> None:
    setup.apiserver.add_node(_node("Reported_2026.08.21 10:00:00"))
    sync = SyncService(
        cluster=setup.cluster,
        sessions=sessions,
        inventory=setup.inventory,
        kube=setup.kube,
        reservation_ttl=timedelta(minutes=5),
        interval_s=3600.0,
        clock=setup.clock,
    )
    sync.start()
    try:
        eventually(lambda: setup.annotation() == "Requesting_2026-08-21 10:00:01", "answered")
        # The plugin's next report, its inventory unchanged, is answered too.
        setup.clock.now = START + timedelta(seconds=30)
        setup.report("Reported_2026.08.21 10:00:30")
        eventually(lambda: setup.annotation() == "Requesting_2026-08-21 10:00:31", "again")
        assert setup.health() == HEALTHY
    finally:
        sync.stop()
