"""Node objects in a scheduling request are evidence, never authority.

With ``nodeCacheCapable: false`` kube-scheduler sends every candidate Node object, and
so can anyone who reaches the verbs. Standalone, a request may register a node the
extender does not know yet; it never changes or empties a known one (that takes the
admin API and its token), a refused request keeps nothing, and with a cluster the
watched Node objects are the only inventory. New nodes reach the store in the
background, so a first request with thousands of them does not write inside it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    StartExtender,
    bind_args,
    node_json,
    pod_json,
)
from tests.support.waiting import eventually
from vgpu_extender import store
from vgpu_extender.domain import NodeInventory
from vgpu_extender.kube.real import RealKubeClient

POD = pod_json("web", mem=4000)
BAD_POD = pod_json("bad", mem=-5)


def _node(name: str, **changes: Any) -> dict[str, Any]:
    node = node_json(name, **changes)
    node["metadata"]["resourceVersion"] = "1"
    return node


def _inflated(name: str) -> dict[str, Any]:
    """A Node object claiming absurd devices (what an attacker would send)."""
    node = _node(name, gpus=1, mem=4_000_000)
    devices = json.loads(node["metadata"]["annotations"]["hami.io/node-nvidia-register"])
    devices[0]["count"] = 1000
    devices[0]["id"] = f"GPU-{name}-0"
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = json.dumps(devices)
    node["metadata"]["resourceVersion"] = "999"
    return node


def _emptied(name: str) -> dict[str, Any]:
    node = _node(name)
    node["metadata"]["annotations"] = {}
    node["metadata"]["resourceVersion"] = "1000"
    return node


def _filter(running: RunningExtender, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> Any:
    body = {"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}
    return running.verb("/filter", body)


def _stored(running: RunningExtender) -> dict[str, NodeInventory]:
    with running.runtime.sessions() as session:
        return {n.name: n for n in store.load_inventories(session)}


def _indexed(running: RunningExtender, name: str) -> NodeInventory | None:
    index = running.runtime.cluster.index
    with running.runtime.cluster.lock:
        return index.inventory(name) if name in index else None


def _settled(running: RunningExtender) -> None:
    assert running.runtime.inventory.drain(), "nodes from requests never reached the store"


ATTACKS: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("inflated", _inflated),
    ("emptied", _emptied),
]


# ------------------------------------------------------------------ standalone
@pytest.mark.parametrize(("attack", "forge"), ATTACKS, ids=[a for a, _ in ATTACKS])
def test_a_known_node_cannot_be_changed_by_a_filters_node_objects(
    extender: StartExtender, attack: str, forge: Callable[[str], dict[str, Any]]
) -> None:
    running = extender(demo=True)
    before_index = _indexed(running, "demo-a100-1")
    before_store = _stored(running)["demo-a100-1"]

    for verb in ("/filter", "/prioritize", "/filter_onlyone"):
        body = {"Pod": POD, "Nodes": {"items": [forge("demo-a100-1")]}, "NodeNames": None}
        running.verb(verb, body)
    _settled(running)

    assert _indexed(running, "demo-a100-1") == before_index
    assert _stored(running)["demo-a100-1"] == before_store
    summary = running.client.get("/api/v1/nodes/demo-a100-1").json()
    assert {d["memory_mib"] for d in summary["devices"]} == {
        d.memory_mib for d in before_store.devices
    }


def test_a_node_registered_by_a_request_is_not_changed_by_the_next(
    extender: StartExtender,
) -> None:
    running = extender()
    first = _filter(running, POD, [_node("gpu-1", gpus=2, mem=16384)])
    assert [n["metadata"]["name"] for n in first["Nodes"]["items"]] == ["gpu-1"]
    registered = _indexed(running, "gpu-1")
    assert registered is not None and len(registered.devices) == 2

    for forge in (_inflated, _emptied):
        _filter(running, POD, [forge("gpu-1")])
    _settled(running)

    assert _indexed(running, "gpu-1") == registered
    assert [d.memory_mib for d in _stored(running)["gpu-1"].devices] == [16384, 16384]


def test_an_unknown_node_is_registered_standalone_and_reaches_the_store(
    extender: StartExtender,
) -> None:
    running = extender()
    answer = _filter(running, POD, [_node("gpu-1"), _node("gpu-2")])
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gpu-1", "gpu-2"]
    _settled(running)
    stored = _stored(running)
    assert sorted(stored) == ["gpu-1", "gpu-2"]
    assert [d.uuid for d in stored["gpu-1"].devices] == ["GPU-gpu-1-0", "GPU-gpu-1-1"]
    # A bind right after the first sight finds its node's row (written on demand).
    assert running.verb("/bind", bind_args(POD, "gpu-1")) == {"Error": ""}
    assert [r.node for r in running.live_rows(POD["metadata"]["uid"])] == ["gpu-1"]


@pytest.mark.parametrize("verb", ["/filter", "/filter_onlyone", "/prioritize"])
def test_a_refused_request_registers_nothing(extender: StartExtender, verb: str) -> None:
    running = extender()
    body = {"Pod": BAD_POD, "Nodes": {"items": [_node("gpu-1")]}, "NodeNames": None}
    answer = running.verb(verb, body)
    if verb == "/prioritize":
        assert answer == []
    else:
        assert "gpumem" in answer["Error"]
    _settled(running)
    assert _indexed(running, "gpu-1") is None
    assert _stored(running) == {}
    # The same node with a good pod is registered: it was the pod that was refused.
    _filter(running, POD, [_node("gpu-1")])
    assert _indexed(running, "gpu-1") is not None


def test_a_node_the_store_refuses_is_not_admitted_again_until_it_changes(
    extender: StartExtender, caplog: pytest.LogCaptureFixture
) -> None:
    """A device type past its column's length: the store refuses the node, so it leaves
    the index again; the same Node object in the next requests is not admitted (and
    refused) again, a changed one is."""
    running = extender()
    bad = _node("gpu-bad", model="T" * 300)
    caplog.set_level(logging.WARNING, logger="vgpu_extender.services.inventory")

    def refusals() -> int:
        return sum(
            "gpu-bad from a request refused by the store" in r.getMessage() for r in caplog.records
        )

    for _ in range(3):
        _filter(running, POD, [_node("gpu-1"), bad])
        _settled(running)
        assert _indexed(running, "gpu-bad") is None
    assert refusals() == 1
    assert sorted(_stored(running)) == ["gpu-1"]

    bad["metadata"]["resourceVersion"] = "2"
    _filter(running, POD, [bad])
    _settled(running)
    assert _indexed(running, "gpu-bad") is None
    assert refusals() == 2


def test_the_names_of_unusable_nodes_kept_are_capped(
    extender: StartExtender, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vgpu_extender.services import inventory

    monkeypatch.setattr(inventory, "UNUSABLE_KEPT", 5)
    running = extender()
    _filter(running, POD, [_emptied(f"empty-{i}") for i in range(20)])
    unusable = running.runtime.inventory._unusable
    assert list(unusable) == [f"empty-{i}" for i in range(15, 20)]


# ------------------------------------------------------------------ with a cluster
@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json("gpu-1", gpus=2, mem=16384))
    return apiserver


def test_with_a_cluster_nothing_comes_from_requests(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    eventually(lambda: _indexed(running, "gpu-1") is not None, "gpu-1 from the watch")
    watched = _indexed(running, "gpu-1")

    answer = _filter(running, POD, [_inflated("gpu-1"), _node("gpu-9")])
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gpu-1"]
    assert answer["FailedAndUnresolvableNodes"] == {"gpu-9": "node unregistered"}
    _filter(running, POD, [_emptied("gpu-1")])
    _settled(running)

    assert _indexed(running, "gpu-1") == watched
    assert _indexed(running, "gpu-9") is None
    assert sorted(_stored(running)) == ["gpu-1"]
    assert [d.memory_mib for d in _stored(running)["gpu-1"].devices] == [16384, 16384]


# ------------------------------------------------------------------ 5,000 nodes at once
def _count_nodes(connection: sqlalchemy.Connection) -> int:
    return int(connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar_one())


@contextmanager
def _sqlite_writer_paused(running: RunningExtender) -> Iterator[Callable[[], int]]:
    """Hold SQLite's write lock from another connection: no store write can happen.
    Yields how many node rows there are, read on that connection."""
    url = running.runtime.settings.database_url
    engine = sqlalchemy.create_engine(url, isolation_level=None)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield lambda: _count_nodes(connection)
            finally:
                connection.exec_driver_sql("ROLLBACK")
    finally:
        engine.dispose()


@contextmanager
def _postgres_writer_paused(running: RunningExtender) -> Iterator[Callable[[], int]]:
    """Lock the nodes table against writers from another transaction (reads go on)."""
    engine = sqlalchemy.create_engine(running.runtime.settings.database_url)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            connection.exec_driver_sql("LOCK TABLE nodes IN EXCLUSIVE MODE")
            try:
                yield lambda: _count_nodes(connection)
            finally:
                transaction.rollback()
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_the_first_request_with_5000_new_nodes_writes_no_store_row_inside_it(
    extender: StartExtender, backend: str, request: pytest.FixtureRequest
) -> None:
    """The store is locked against writers for the whole request: it still answers, with
    every node, and the rows appear once the lock goes (the writer retries)."""
    overrides: dict[str, Any] = {}
    if backend == "postgresql":
        overrides["database_url"] = request.getfixturevalue("fresh_postgres")
    running = extender(**overrides)
    paused = _sqlite_writer_paused if backend == "sqlite" else _postgres_writer_paused
    nodes = [_node(f"gpu-{i:04d}") for i in range(5000)]
    answered: list[Any] = []
    with paused(running) as node_rows:
        # On a thread: were the request to write, it would wait on the lock held here.
        thread = threading.Thread(target=lambda: answered.append(_filter(running, POD, nodes)))
        thread.start()
        thread.join(60.0)
        assert answered, "the first request waited for the store"
        assert len(answered[0]["Nodes"]["items"]) == 5000
        assert node_rows() == 0
    assert running.runtime.inventory.drain(60.0)
    stored = _stored(running)
    assert len(stored) == 5000
    assert [d.uuid for d in stored["gpu-4999"].devices] == ["GPU-gpu-4999-0", "GPU-gpu-4999-1"]
