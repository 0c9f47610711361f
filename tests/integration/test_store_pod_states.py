"""``pod_states``: every live pod's metadata in one grouped query, as ``assignments``
states it, whole or a page at a time; ``pod_names``: the names of the pods asked for; on
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.integration.store_contract import T0, Db, do_reserve, emptied, grants, put_node
from tests.integration.test_store_postgres import _new_schema, _schema_engine
from vgpu_extender.store import (
    AllocationState,
    assignments,
    make_engine,
    mark_bound,
    migrate,
    pod_names,
    pod_states,
    release,
)
from vgpu_extender.store import allocations as store_allocations


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        migrate(engine)
        yield emptied(engine)
        engine.dispose()
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    for schema in _new_schema(postgres_url):
        engine = _schema_engine(postgres_url, schema)
        migrate(engine)
        yield emptied(engine)
        engine.dispose()


def test_each_live_pod_once_with_the_metadata_assignments_gives(db: Db) -> None:
    put_node(db)
    # Two containers on two devices, reserved; one of its rows made later.
    do_reserve(db, "two", grants("node-a", [("GPU-a0", 1024, 10)], [("GPU-a1", 1024, 10)]))
    do_reserve(db, "bound", grants("node-a", [("GPU-a0", 2048, 20)]), now=T0 + timedelta(1))
    do_reserve(db, "gone", grants("node-a", [("GPU-a1", 512, 5)]))
    with db.factory.begin() as session:
        mark_bound(session, pod_uid="bound", now=T0 + timedelta(2))
        release(session, pod_uid="gone", now=T0 + timedelta(3))

    with db.factory() as session:
        states = {meta.uid: meta for meta in pod_states(session)}
        expected = {uid: stored.meta for uid, stored in assignments(session).items()}

    assert states == expected
    assert sorted(states) == ["bound", "two"]
    assert states["two"].state is AllocationState.RESERVED and states["two"].bound_at is None
    assert states["bound"].state is AllocationState.BOUND
    assert states["bound"].bound_at == T0 + timedelta(2)
    assert states["bound"].created_at == T0 + timedelta(1)


def test_no_live_pod_no_state(db: Db) -> None:
    with db.factory() as session:
        assert list(pod_states(session)) == []


def test_read_a_page_at_a_time_every_live_pod_comes_once_in_uid_order(db: Db) -> None:
    put_node(db)
    uids = ["c", "a", "e", "b", "d", "gone"]
    for uid in uids:
        # Two containers each: a pod's rows are one state, never split between pages.
        do_reserve(db, uid, grants("node-a", [("GPU-a0", 100, 1)], [("GPU-a1", 100, 1)]))
    with db.factory.begin() as session:
        release(session, pod_uid="gone", now=T0 + timedelta(3))

    pages: list[list[str]] = []
    after = ""
    while True:
        with db.factory() as session:
            page = [meta.uid for meta in pod_states(session, after=after, limit=2)]
        if not page:
            break
        pages.append(page)
        after = page[-1]

    assert pages == [["a", "b"], ["c", "d"], ["e"]]
    with db.factory() as session:
        assert [meta.uid for meta in pod_states(session)] == ["a", "b", "c", "d", "e"]


def test_pods_are_named_once_each_in_reads_of_a_bounded_size(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_node(db)
    do_reserve(db, "two", grants("node-a", [("GPU-a0", 1024, 10)], [("GPU-a1", 1024, 10)]))
    do_reserve(db, "gone", grants("node-a", [("GPU-a1", 512, 5)]))
    with db.factory.begin() as session:
        release(session, pod_uid="gone", now=T0 + timedelta(3))
    # Read two uids at a time: five distinct uids take three reads.
    monkeypatch.setattr(store_allocations, "NAMES_PER_READ", 2)

    with db.factory() as session:
        names = pod_names(session, ["two", "gone", "never", "two", "other", "more"])

    # One entry per pod, whatever its rows (two containers) or state (released).
    assert names == {"two": ("ns", "pod-two"), "gone": ("ns", "pod-gone")}
