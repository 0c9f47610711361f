"""Binds in flight at once, as kube-scheduler sends them (its binding cycle is async).

Several binds to one node queue for it, each with its devices chosen on arrival in
the light of the binds before it, so none fails for choosing a device another bind
just took; and a bind's devices count as taken for the next filters from the moment
it arrives, not only once its turn at the store comes or the store has them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from tests.support.apiserver import FakeApiServer
from tests.support.server import RunningExtender, StartExtender, args, bind_args, node_json
from tests.support.server import pod_json as make_pod
from tests.support.waiting import eventually
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"
# 2 GPUs x 10 shares: room for 20 pods of 1000 MiB / 5 cores, exactly.
ROOM = 20


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'extender.db'}"
    url: str = request.getfixturevalue("fresh_postgres")
    return url


def _start(
    extender: StartExtender, apiserver: FakeApiServer, kube: RealKubeClient, **settings: Any
) -> RunningExtender:
    apiserver.add_node(node_json(NODE, gpus=2, mem=10_000))
    running = extender(kube=kube, **settings)
    assert NODE in running.runtime.cluster.index
    return running


def test_binds_to_one_node_at_once_all_succeed_while_there_is_room(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
    database_url: str,
) -> None:
    # One try per bind: a bind that chose a device another bind took meanwhile would
    # fail instead of being rescued by a retry.
    running = _start(extender, apiserver, real_kube, database_url=database_url, bind_retries=1)
    pods = [apiserver.add_pod(make_pod(f"p{i:02d}", mem=1000, cores=5)) for i in range(ROOM + 4)]
    for pod in pods:  # kube-scheduler filters every pod before binding it
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]

    def bind(pod: dict[str, Any]) -> str:
        error: str = running.verb("/bind", bind_args(pod, NODE))["Error"]
        return error

    with ThreadPoolExecutor(max_workers=24) as pool:
        errors = list(pool.map(bind, pods))

    refused = [e for e in errors if e]
    # Exactly the room is bound; the rest are refused for lack of room, never because
    # two binds chose the same device at once.
    assert len(refused) == len(pods) - ROOM, refused
    assert all("cannot take the pod: insufficient gpu slots" in e for e in refused), refused
    nodes = [
        apiserver.get_pod("default", p["metadata"]["name"])["spec"].get("nodeName") for p in pods
    ]
    assert nodes.count(NODE) == ROOM


@contextmanager
def _held_insert(running: RunningExtender) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Pause the store's allocation INSERT until ``release`` is set; ``reached`` says
    the bind got there. A ``fail`` attribute on ``release`` makes the INSERT fail."""
    reached, release = threading.Event(), threading.Event()
    engine = running.runtime.engine

    def pause(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ALLOCATIONS"):
            reached.set()
            release.wait(30)
            if getattr(release, "fail", False):
                raise RuntimeError("the store is gone")

    event.listen(engine, "before_cursor_execute", pause)
    try:
        yield reached, release
    finally:
        release.set()
        event.remove(engine, "before_cursor_execute", pause)


def test_a_bind_takes_its_devices_for_filters_before_the_store_has_them(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    whole = apiserver.add_pod(make_pod("whole", gpus=2, mem=10_000, cores=100))
    other = apiserver.add_pod(make_pod("other", gpus=2, mem=10_000, cores=100))
    assert running.verb("/filter", args(whole, [NODE]))["NodeNames"] == [NODE]

    with _held_insert(running) as (reached, release), ThreadPoolExecutor(1) as pool:
        answer = pool.submit(running.verb, "/bind", bind_args(whole, NODE))
        assert reached.wait(30)
        # The bind is still writing: its devices are taken already.
        verdict = running.verb("/filter", args(other, [NODE]))
        assert verdict["NodeNames"] == []
        assert NODE in verdict["FailedNodes"]
        release.set()
        assert answer.result(30) == {"Error": ""}


def test_a_bind_waiting_for_its_turn_has_its_devices_taken_already(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    # kube-scheduler filters the next pod while the binds before it are still in
    # flight: a bind queued behind another on the same node must not leave its devices
    # looking free to those filters until its own turn at the store comes.
    running = _start(extender, apiserver, real_kube)
    first, second, third = (
        apiserver.add_pod(make_pod(name, gpus=1, mem=10_000, cores=100))
        for name in ("first", "second", "third")
    )
    for pod in (first, second, third):
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    index = running.runtime.cluster.index

    with _held_insert(running) as (reached, release), ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(running.verb, "/bind", bind_args(first, NODE))]
        assert reached.wait(30)  # the first bind holds the node's turn at the store
        answers.append(pool.submit(running.verb, "/bind", bind_args(second, NODE)))
        eventually(
            lambda: index.allocation(second["metadata"]["uid"]) is not None,
            "the queued bind took its device on arrival",
        )
        verdict = running.verb("/filter", args(third, [NODE]))
        assert verdict["NodeNames"] == []
        # Each pod takes a whole GPU (100 cores): both of the node's are spoken for.
        assert verdict["FailedNodes"][NODE] == "exclusive gpu conflict: need 1, have 0"
        release.set()
        assert [a.result(30) for a in answers] == [{"Error": ""}, {"Error": ""}]
    devices = {
        index.allocation(p["metadata"]["uid"]).assignment.device_uuids[0]  # type: ignore[union-attr]
        for p in (first, second)
    }
    assert len(devices) == 2


def test_a_refused_claim_answers_at_once_as_filter_would(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    whole = apiserver.add_pod(make_pod("whole", gpus=2, mem=10_000, cores=100))
    late = apiserver.add_pod(make_pod("late", gpus=1, mem=1000, cores=5))
    for pod in (whole, late):
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    assert running.verb("/bind", bind_args(whole, NODE)) == {"Error": ""}
    writes = _writes(apiserver)
    error = running.verb("/bind", bind_args(late, NODE))["Error"]
    assert error.startswith(f"bind default/late: node {NODE} cannot take the pod: ")
    # Refused in memory: nothing was written to the API server.
    assert _writes(apiserver) == writes
    assert running.runtime.cluster.index.allocation(late["metadata"]["uid"]) is None


def _writes(apiserver: FakeApiServer) -> list[tuple[str, str]]:
    return [(method, path) for method, path in apiserver.requests if method != "GET"]


def test_a_choice_the_store_refuses_is_taken_back(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    whole = apiserver.add_pod(make_pod("whole", gpus=2, mem=10_000, cores=100))
    assert running.verb("/filter", args(whole, [NODE]))["NodeNames"] == [NODE]

    with _held_insert(running) as (reached, release), ThreadPoolExecutor(1) as pool:
        answer = pool.submit(running.verb, "/bind", bind_args(whole, NODE))
        assert reached.wait(30)
        release.fail = True  # type: ignore[attr-defined]
        release.set()
        assert "the store is gone" in answer.result(30)["Error"]

    assert running.runtime.cluster.index.allocation(whole["metadata"]["uid"]) is None
    assert running.verb("/filter", args(whole, [NODE]))["NodeNames"] == [NODE]


def _filtered(running: RunningExtender, apiserver: FakeApiServer, count: int) -> list[Any]:
    """``count`` pods that fit together, each filtered as kube-scheduler would first."""
    pods = [apiserver.add_pod(make_pod(f"p{i}", mem=1000, cores=5)) for i in range(count)]
    for pod in pods:
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    return pods


@contextmanager
def _before_each_insert(
    running: RunningExtender, hook: Callable[[int, int], None]
) -> Iterator[None]:
    """Call ``hook(n, rows)`` before the store's n-th allocation INSERT (from 1)."""
    seen: list[int] = []

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ALLOCATIONS"):
            seen.append(1)
            hook(len(seen), len(parameters) if isinstance(parameters, list) else 1)

    engine = running.runtime.engine
    event.listen(engine, "before_cursor_execute", before)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", before)


def _batch_sizes(running: RunningExtender) -> dict[str, float]:
    """The ``vgpu_extender_bind_batch_size`` histogram: count, sum, and two buckets."""
    wanted = {
        ("vgpu_extender_bind_batch_size_count", ""): "count",
        ("vgpu_extender_bind_batch_size_sum", ""): "sum",
        ("vgpu_extender_bind_batch_size_bucket", "1.0"): "le_1",
        ("vgpu_extender_bind_batch_size_bucket", "4.0"): "le_4",
    }
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(running.client.get("/metrics").text):
        for sample in family.samples:
            key = wanted.get((sample.name, sample.labels.get("le", "")))
            if key is not None:
                found[key] = sample.value
    return found


def _bind_behind_the_first(
    running: RunningExtender, pool: ThreadPoolExecutor, pods: list[Any], reached: threading.Event
) -> tuple[Future[Any], list[Future[Any]]]:
    """Bind the first pod; once its insert is reached, bind the others and wait until
    they all queue for the node's turn."""
    first = pool.submit(running.verb, "/bind", bind_args(pods[0], NODE))
    assert reached.wait(30)
    rest = [pool.submit(running.verb, "/bind", bind_args(p, NODE)) for p in pods[1:]]
    eventually(
        lambda: running.runtime.binding.waiting(NODE) == len(rest),
        "the other binds queued for the node's turn",
    )
    return first, rest


def test_binds_queued_behind_a_write_go_in_one_transaction(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    pods = _filtered(running, apiserver, 4)
    reached, release = threading.Event(), threading.Event()
    inserts: list[int] = []

    def hold_first(n: int, rows: int) -> None:
        inserts.append(rows)
        if n == 1:
            reached.set()
            release.wait(30)

    with _before_each_insert(running, hold_first), ThreadPoolExecutor(4) as pool:
        try:
            first, rest = _bind_behind_the_first(running, pool, pods, reached)
        finally:
            release.set()
        assert [a.result(30) for a in (first, *rest)] == [{"Error": ""}] * 4
    # The held bind's own insert, then one insert of the three queued behind it.
    assert inserts == [1, 3]
    assert running.runtime.binding.waiting(NODE) == 0
    assert _batch_sizes(running) == {"count": 2.0, "sum": 4.0, "le_1": 1.0, "le_4": 2.0}
    for pod in pods:
        bound = apiserver.get_pod("default", pod["metadata"]["name"])
        assert bound["spec"]["nodeName"] == NODE
        assert "hami.io/vgpu-devices-allocated" in bound["metadata"]["annotations"]


def test_a_failed_transaction_fails_only_the_binds_in_it(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    pods = _filtered(running, apiserver, 3)
    reached, release = threading.Event(), threading.Event()

    def fail_first(n: int, _rows: int) -> None:
        if n == 1:
            reached.set()
            release.wait(30)
            raise RuntimeError("the store is gone")

    with _before_each_insert(running, fail_first), ThreadPoolExecutor(3) as pool:
        try:
            first, rest = _bind_behind_the_first(running, pool, pods, reached)
        finally:
            release.set()
        assert "the store is gone" in first.result(30)["Error"]
        assert [a.result(30) for a in rest] == [{"Error": ""}] * 2
    index = running.runtime.cluster.index
    assert index.allocation(pods[0]["metadata"]["uid"]) is None
    assert all(index.allocation(p["metadata"]["uid"]) is not None for p in pods[1:])
    assert apiserver.get_pod("default", "p0")["spec"].get("nodeName") is None


def test_every_bind_of_a_batch_the_store_fails_learns_why_and_gives_its_devices_back(
    extender: StartExtender,
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
) -> None:
    running = _start(extender, apiserver, real_kube)
    pods = _filtered(running, apiserver, 3)
    reached, release = threading.Event(), threading.Event()
    inserts: list[int] = []

    def hold_first_then_fail(n: int, rows: int) -> None:
        inserts.append(rows)
        if n == 1:  # the first bind's own: held while the others queue
            reached.set()
            release.wait(30)
            return
        raise OperationalError("INSERT", {}, Exception("server closed the connection"))

    with _before_each_insert(running, hold_first_then_fail), ThreadPoolExecutor(3) as pool:
        try:
            first, rest = _bind_behind_the_first(running, pool, pods, reached)
        finally:
            release.set()
        assert first.result(30) == {"Error": ""}
        errors = [a.result(30)["Error"] for a in rest]
    assert inserts == [1, 2]  # the two queued binds were one transaction
    for pod, error in zip(pods[1:], errors, strict=True):
        name = pod["metadata"]["name"]
        assert error.startswith(f"bind default/{name}: store unavailable: reserve: "), error
        assert "server closed the connection" in error
    index = running.runtime.cluster.index
    assert index.allocation(pods[0]["metadata"]["uid"]) is not None
    assert all(index.allocation(p["metadata"]["uid"]) is None for p in pods[1:])
    # Their devices are free again: the pods pass filter once more and bind.
    for pod in pods[1:]:
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
        assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
