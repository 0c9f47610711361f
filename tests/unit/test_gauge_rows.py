"""The allocation gauges' rows of a running extender: devices and grants from the index,
each pod's name read from the store once, a pod left out while it cannot be named."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from tests.support.builders import make_assignment, make_node
from vgpu_extender import store
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.gauge_rows import IndexGaugeRows
from vgpu_extender.services.store_health import StoreHealth
from vgpu_extender.vendors import create_vendor


def _cluster(sessions: sessionmaker[Session]) -> ClusterState:
    nodes = [make_node("a", 2), make_node("b", 1)]
    with sessions.begin() as session:
        for node in nodes:
            store.upsert_node(session, inventory=node, source="annotation")
    cluster = ClusterState(vendor=create_vendor("nvidia"))
    cluster.upsert_nodes(nodes)
    return cluster


def _place(
    cluster: ClusterState, sessions: sessionmaker[Session], uid: str, name: str, node: str
) -> None:
    assignment = make_assignment(node, [(0, 1024, 10)])
    with sessions.begin() as session:
        store.reserve(session, pod_uid=uid, namespace="ml", name=name, assignment=assignment)
    cluster.apply(uid, assignment)


@contextmanager
def _name_reads(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    """The statements that read pods' names, as the engine runs them."""
    seen: list[str] = []
    engine = sessions.kw["bind"]

    def before(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("SELECT") and "allocations.pod_name" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", before)


def _rows(source: IndexGaugeRows) -> dict[str, tuple[int, list[tuple[str, str]], bool]]:
    names = [name for name, _ in source.stamps()]
    return {
        n.node: (len(n.devices), [(g.namespace, g.pod) for g in n.grants], n.complete)
        for n in source.nodes(names)
    }


def test_grants_carry_the_names_the_store_holds_read_once_per_pod(
    sessions: sessionmaker[Session],
) -> None:
    cluster = _cluster(sessions)
    _place(cluster, sessions, "uid-1", "trainer", "a")
    source = IndexGaugeRows(cluster, sessions, StoreHealth(sessions.kw["bind"]))

    with _name_reads(sessions) as reads:
        assert _rows(source) == {
            "a": (2, [("ml", "trainer")], True),
            "b": (1, [], True),
        }
        assert len(reads) == 1
        _rows(source)
        assert len(reads) == 1  # known pods are not read again

        _place(cluster, sessions, "uid-2", "server", "b")
        assert _rows(source)["b"] == (1, [("ml", "server")], True)
        assert len(reads) == 2  # the new pod only


def test_a_pod_the_store_cannot_name_is_left_out_until_it_can(
    sessions: sessionmaker[Session],
) -> None:
    cluster = _cluster(sessions)
    _place(cluster, sessions, "uid-1", "trainer", "a")
    health = StoreHealth(sessions.kw["bind"], unready_after=1)
    source = IndexGaugeRows(cluster, sessions, health)
    # Held by the index (its bind assumed it) but not written to the store yet.
    cluster.apply("uid-late", make_assignment("a", [(1, 512, 5)]))

    assert _rows(source)["a"] == (2, [("ml", "trainer")], False)

    health.failed("connection refused")  # readiness says the store is gone
    with _name_reads(sessions) as reads:
        # The pod named before keeps its name; the other is not even asked for.
        assert _rows(source)["a"] == (2, [("ml", "trainer")], False)
        assert reads == []

    for _ in range(3):  # the probes pass again; the bind's row is written
        health.succeeded()
    with sessions.begin() as session:
        late = make_assignment("a", [(1, 512, 5)])
        store.reserve(session, pod_uid="uid-late", namespace="ml", name="late", assignment=late)
    assert _rows(source)["a"] == (2, [("ml", "trainer"), ("ml", "late")], True)
