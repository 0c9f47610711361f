"""The background writer of nodes first seen in a request, on a real SQLite store:
batched, retried while the store refuses, written at once on demand, cancelled when
a later write supersedes it, and a node the store will never take reported."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.orm import Session, sessionmaker

from vgpu_extender import store
from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.services.node_writer import NodeWriter


def _node(name: str, *, uuid: str | None = None, gpus: int = 2) -> NodeInventory:
    devices = tuple(
        Device(uuid=uuid or f"GPU-{name}-{i}", index=i, count=10, memory_mib=16384, cores=100)
        for i in range(1 if uuid else gpus)
    )
    return NodeInventory(name=name, devices=devices, labels={"zone": "a"})


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def sessions(url: str) -> Iterator[sessionmaker[Session]]:
    # A writer gives up on a locked store after 0.1 s (and tries again later).
    engine = store.make_engine(url, connect_args={"timeout": 0.1})
    store.migrate(engine)
    yield store.session_factory(engine)
    engine.dispose()


class Refusals:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, inventory: NodeInventory, exc: store.StoreError) -> None:
        self.seen.append((inventory.name, str(exc)))


def _writer(sessions: sessionmaker[Session], refusals: Refusals | None = None) -> NodeWriter:
    return NodeWriter(
        sessions=sessions,
        clock=lambda: datetime.now(UTC),
        on_refused=refusals or Refusals(),
        batch_size=100,
        retry_s=0.05,
    )


def _stored(sessions: sessionmaker[Session]) -> dict[str, NodeInventory]:
    with sessions() as session:
        return {n.name: n for n in store.load_inventories(session)}


def _locked(url: str) -> sqlalchemy.Connection:
    """Another connection holding SQLite's write lock until it rolls back."""
    connection = sqlalchemy.create_engine(url, isolation_level=None).connect()
    connection.exec_driver_sql("BEGIN IMMEDIATE")
    return connection


def test_every_submitted_node_reaches_the_store_in_batches(
    sessions: sessionmaker[Session],
) -> None:
    writer = _writer(sessions)
    nodes = [_node(f"gpu-{i:03d}") for i in range(350)]
    writer.submit(nodes)
    assert writer.drain()
    stored = _stored(sessions)
    assert sorted(stored) == [n.name for n in nodes]
    assert stored["gpu-349"].devices == nodes[-1].devices
    assert stored["gpu-349"].labels == {"zone": "a"}
    writer.stop()


def test_a_locked_store_is_retried_until_it_takes_the_nodes(
    url: str, sessions: sessionmaker[Session]
) -> None:
    writer = _writer(sessions)
    lock = _locked(url)
    try:
        writer.submit([_node("gpu-1")])
        assert writer.drain(0.5) is False  # refused while locked, still pending
        assert writer.pending() == 1
    finally:
        lock.exec_driver_sql("ROLLBACK")
        lock.close()
    assert writer.drain()
    assert list(_stored(sessions)) == ["gpu-1"]
    writer.stop()


def test_flush_writes_a_pending_node_at_once(sessions: sessionmaker[Session]) -> None:
    writer = _writer(sessions)
    nodes = [_node(f"gpu-{i:04d}") for i in range(1000)]
    writer.submit(nodes)
    writer.flush("gpu-0999")  # the last batch's node, long before the thread gets to it
    assert "gpu-0999" in _stored(sessions)
    assert writer.drain()
    writer.stop()


def test_flush_of_a_locked_store_raises_and_keeps_the_node_pending(
    url: str, sessions: sessionmaker[Session]
) -> None:
    writer = _writer(sessions)
    lock = _locked(url)
    try:
        writer.submit([_node("gpu-1")])
        with pytest.raises(store.StoreError, match="locked"):
            writer.flush("gpu-1")
        assert writer.pending() == 1
    finally:
        lock.exec_driver_sql("ROLLBACK")
        lock.close()
    writer.flush("gpu-1")
    assert list(_stored(sessions)) == ["gpu-1"]
    writer.stop()


def test_cancelled_nodes_are_never_written(url: str, sessions: sessionmaker[Session]) -> None:
    writer = _writer(sessions)
    lock = _locked(url)
    try:
        writer.submit([_node("gpu-1"), _node("gpu-2")])
        writer.cancel(["gpu-1"])
    finally:
        lock.exec_driver_sql("ROLLBACK")
        lock.close()
    assert writer.drain()
    assert list(_stored(sessions)) == ["gpu-2"]
    writer.stop()


def test_a_node_the_store_refuses_is_reported_and_the_rest_written(
    sessions: sessionmaker[Session],
) -> None:
    with sessions.begin() as session:
        store.upsert_node(session, inventory=_node("owner"), source="file")
    refusals = Refusals()
    writer = _writer(sessions, refusals)
    writer.submit([_node("gpu-1"), _node("thief", uuid="GPU-owner-0"), _node("gpu-2")])
    assert writer.drain()
    assert sorted(_stored(sessions)) == ["gpu-1", "gpu-2", "owner"]
    assert [name for name, _ in refusals.seen] == ["thief"]
    assert "GPU-owner-0" in refusals.seen[0][1] and "owner" in refusals.seen[0][1]
    writer.stop()


def test_stop_writes_what_is_pending(url: str, sessions: sessionmaker[Session]) -> None:
    writer = _writer(sessions)
    lock = _locked(url)
    try:
        writer.submit([_node("gpu-1")])
    finally:
        lock.exec_driver_sql("ROLLBACK")
        lock.close()
    writer.stop()
    assert list(_stored(sessions)) == ["gpu-1"]


class FailingCommits:
    """Every commit of ``sessions`` fails as a connection lost at commit does, with the
    driver's raw error, until ``stop``; ``count`` says how many failed."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.count = 0
        self.on = True
        sqlalchemy.event.listen(sessions, "before_commit", self._fail)

    def _fail(self, session: Session) -> None:
        if self.on:
            self.count += 1
            raise sqlalchemy.exc.OperationalError(
                "COMMIT", {}, Exception("server closed the connection unexpectedly")
            )

    def stop(self) -> None:
        self.on = False


def test_flush_whose_commit_fails_raises_a_store_error_and_keeps_the_node_pending(
    sessions: sessionmaker[Session],
) -> None:
    writer = _writer(sessions)
    commits = FailingCommits(sessions)
    with writer._writing:  # the thread writes nothing meanwhile
        writer.submit([_node("gpu-1")])
    try:
        with pytest.raises(store.StoreError, match="server closed the connection") as raised:
            writer.flush("gpu-1")
        assert isinstance(raised.value.__cause__, sqlalchemy.exc.OperationalError)
        assert commits.count
        assert writer.pending() == 1
    finally:
        commits.stop()
    writer.flush("gpu-1")
    assert list(_stored(sessions)) == ["gpu-1"]
    writer.stop()


def test_a_batch_whose_commit_fails_is_pending_again(sessions: sessionmaker[Session]) -> None:
    writer = _writer(sessions)
    commits = FailingCommits(sessions)
    try:
        writer.submit([_node("gpu-1"), _node("gpu-2")])
        assert writer.drain(0.5) is False
        assert commits.count
        with writer._writing:  # not between taking the batch and putting it back
            assert writer.pending() == 2
    finally:
        commits.stop()
    assert writer.drain()
    assert sorted(_stored(sessions)) == ["gpu-1", "gpu-2"]
    writer.stop()


def test_a_batch_with_a_node_of_a_long_problem_is_written_with_the_problem_cut(
    sessions: sessionmaker[Session],
) -> None:
    refusals = Refusals()
    writer = _writer(sessions, refusals)
    long = dataclasses.replace(_node("gpu-2"), problem="x" * 5000)
    writer.submit([_node("gpu-1"), long, _node("gpu-3")])
    assert writer.drain()
    stored = _stored(sessions)
    assert sorted(stored) == ["gpu-1", "gpu-2", "gpu-3"]
    assert stored["gpu-2"].problem.startswith("xxx")
    assert len(stored["gpu-2"].problem) <= 1024
    assert refusals.seen == []
    writer.stop()


def test_one_node_the_database_refuses_holds_up_no_other_in_its_batch(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal that is neither bad input nor a conflict (the database's own answer):
    the batch is written a node at a time, and only the refused node waits to be
    tried again."""
    from vgpu_extender.services import node_writer

    real = node_writer.insert_new_nodes
    refusing = {"on": True}

    def insert(session: Session, **kwargs: Any) -> list[NodeInventory]:
        if refusing["on"] and any(i.name == "bad" for i in kwargs["inventories"]):
            raise store.StoreError("value too long for type", operation="insert new nodes")
        return real(session, **kwargs)

    monkeypatch.setattr(node_writer, "insert_new_nodes", insert)
    refusals = Refusals()
    writer = _writer(sessions, refusals)
    good = [_node(f"gpu-{i:03d}") for i in range(249)]
    writer.submit([*good[:100], _node("bad"), *good[100:]])
    assert writer.drain(1.0) is False
    assert sorted(_stored(sessions)) == [n.name for n in good]
    assert writer.pending() == 1
    assert refusals.seen == []
    refusing["on"] = False
    assert writer.drain()
    assert "bad" in _stored(sessions)
    writer.stop()
