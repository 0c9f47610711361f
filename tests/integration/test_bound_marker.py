"""Marking rows bound in the background, after the Binding, on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.store_contract import T0, Db, do_reserve, grants, live, put_node
from vgpu_extender import store
from vgpu_extender.services.bound_marker import BoundMarker


@pytest.fixture
def db(tmp_path: Path) -> Db:
    engine = store.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate(engine)
    return Db(engine, store.session_factory(engine))


def test_queued_pods_are_marked_bound_and_vanished_ones_left_to_reconcile(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    put_node(db)
    do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
    do_reserve(db, "p2", grants("node-a", [("GPU-a1", 1000, 0)]))
    marker = BoundMarker(engine=db.engine, clock=lambda: T0)
    for uid in ("p1", "p2", "released-meanwhile"):
        marker.mark(uid)
    marker.start()
    marker.stop()  # marks everything queued before it returns
    assert [(row[0], row[4]) for row in live(db)] == [
        ("p1", store.AllocationState.BOUND),
        ("p2", store.AllocationState.BOUND),
    ]
    assert "pod released-meanwhile bound, but its reservation was gone" in caplog.text


def test_a_store_failure_leaves_the_rows_reserved_for_reconcile(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    put_node(db)
    do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
    broken = store.make_engine("sqlite:////nonexistent-dir/store.db")
    marker = BoundMarker(engine=broken, clock=lambda: T0)
    marker.mark("p1")
    marker.start()
    marker.stop()
    assert [(row[0], row[4]) for row in live(db)] == [("p1", store.AllocationState.RESERVED)]
    assert "1 bound pod(s) not recorded as bound yet" in caplog.text
