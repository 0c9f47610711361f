"""Behaviour every store backend must show; run against SQLite and PostgreSQL.

A backend's test module subclasses ``StoreContract`` and provides two fixtures:
``db`` (a migrated database, emptied for each test) and ``unmigrated`` (an engine on
a database with no schema).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from vgpu_extender.domain import Device, DeviceGrant, NodeInventory, PodAssignment, Reason
from vgpu_extender.store import (
    NODE_ABSENT,
    AllocationState,
    AlreadyAllocated,
    ImportConflict,
    NodeRemoval,
    Reservation,
    StoreConflict,
    StoreError,
    StoreInputError,
    assignments,
    delete_reservation,
    expire_reservations,
    head_revision,
    import_assignment,
    live_allocations,
    load_inventories,
    mark_bound,
    mark_many_bound,
    migrate,
    release,
    remove_node,
    reserve,
    reserve_all,
    schema_revision,
    session_factory,
    upsert_node,
)
from vgpu_extender.store.models import Base

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
MIB = 8192


@dataclass(frozen=True)
class Db:
    engine: Engine
    factory: sessionmaker[Session]


def emptied(engine: Engine) -> Db:
    """The migrated database behind ``engine`` with every row deleted."""
    with engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())
    return Db(engine, session_factory(engine))


def gpu(
    uuid: str,
    *,
    index: int = 0,
    count: int = 10,
    memory: int = MIB,
    cores: int = 100,
    numa: int = 0,
    mode: str = "hami-core",
    healthy: bool = True,
) -> Device:
    return Device(
        uuid=uuid,
        index=index,
        count=count,
        memory_mib=memory,
        cores=cores,
        type="A100",
        numa=numa,
        mode=mode,
        healthy=healthy,
    )


NODE_A = NodeInventory(
    name="node-a",
    devices=(gpu("GPU-a0", index=0), gpu("GPU-a1", index=1)),
    labels={"zone": "z1"},
)


def grants(node: str, *containers: Sequence[tuple[str, int, int]]) -> PodAssignment:
    return PodAssignment(
        node=node,
        containers=tuple(tuple(DeviceGrant(u, m, c) for u, m, c in cont) for cont in containers),
    )


def put_node(db: Db, inventory: NodeInventory = NODE_A) -> None:
    with db.factory.begin() as session:
        upsert_node(session, inventory=inventory, source="api", now=T0)


def do_reserve(db: Db, uid: str, assignment: PodAssignment, *, now: datetime = T0) -> None:
    with db.factory.begin() as session:
        reserve(
            session, pod_uid=uid, namespace="ns", name=f"pod-{uid}", assignment=assignment, now=now
        )


def live(db: Db, **kw: str) -> list[tuple[str, str, int, int, AllocationState]]:
    with db.factory() as session:
        return [
            (a.pod_uid, a.device_uuid, a.memory_mib, a.cores, a.state)
            for a in live_allocations(session, **kw)
        ]


# Each case: inventory, pods already reserved, the new pod's assignment, the expected
# refusal (None: it fits) and a fragment of the message.
RESERVE_CASES = [
    pytest.param(NODE_A, [], grants("node-a", [("GPU-a0", 4000, 30)]), None, "", id="fits"),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 5000, 0)])],
        grants("node-a", [("GPU-a0", 4000, 0)]),
        Reason.MEMORY,
        "device GPU-a0 on node-a over-allocated: memory 9000/8192 MiB",
        id="memory-over",
    ),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 1000, 60)])],
        grants("node-a", [("GPU-a0", 1000, 50)]),
        Reason.CORES,
        "cores 110/100",
        id="cores-over",
    ),
    pytest.param(
        replace(NODE_A, devices=(gpu("GPU-a0", count=2),)),
        [grants("node-a", [("GPU-a0", 100, 0)]), grants("node-a", [("GPU-a0", 100, 0)])],
        grants("node-a", [("GPU-a0", 100, 0)]),
        Reason.SLOTS,
        "slots 3/2",
        id="slots-over",
    ),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 1000, 0)])],
        grants("node-a", [("GPU-a0", 1000, 100)]),
        Reason.EXCLUSIVE,
        "needs an empty device",
        id="exclusive-on-used-device",
    ),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 1000, 100)])],
        grants("node-a", [("GPU-a0", 1000, 0)]),
        Reason.NO_COMPUTE,
        "all cores in use",
        id="share-exclusive-device",
    ),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 1000, 100)])],
        grants("node-a", [("GPU-a1", 1000, 100)]),
        None,
        "",
        id="exclusive-on-other-device",
    ),
    pytest.param(
        replace(NODE_A, devices=(gpu("GPU-a0", healthy=False),)),
        [],
        grants("node-a", [("GPU-a0", 100, 0)]),
        Reason.UNHEALTHY,
        "GPU-a0 on node-a is unhealthy",
        id="unhealthy",
    ),
    pytest.param(
        replace(NODE_A, cordoned=frozenset({"GPU-a1"})),
        [],
        grants("node-a", [("GPU-a1", 100, 0)]),
        Reason.CORDONED,
        "cordoned",
        id="cordoned",
    ),
    pytest.param(
        NODE_A,
        [],
        grants("node-a", [("GPU-zz", 100, 0)]),
        Reason.UUID_MISMATCH,
        "not on node",
        id="device-not-on-node",
    ),
    pytest.param(
        NODE_A,
        [],
        grants("node-x", [("GPU-a0", 100, 0)]),
        Reason.UNKNOWN_NODE,
        "not registered",
        id="unknown-node",
    ),
    pytest.param(
        replace(NODE_A, problem="annotation unreadable"),
        [],
        grants("node-a", [("GPU-a0", 100, 0)]),
        Reason.INVENTORY,
        "annotation unreadable",
        id="node-problem",
    ),
    pytest.param(
        NODE_A,
        [grants("node-a", [("GPU-a0", 4000, 0)])],
        grants("node-a", [("GPU-a0", 2000, 0)], [("GPU-a0", 2000, 0), ("GPU-a1", 9000, 0)]),
        Reason.MEMORY,
        "GPU-a1 on node-a over-allocated: memory 9000/8192",
        id="second-device-over",
    ),
]


class StoreContract:
    """The store's behaviour, independent of the backend."""

    def test_migrate_from_empty_reaches_head_and_matches_models(self, unmigrated: Engine) -> None:
        assert schema_revision(unmigrated) is None
        migrate(unmigrated)
        assert schema_revision(unmigrated) == head_revision()
        migrate(unmigrated)  # a second run is a no-op
        assert schema_revision(unmigrated) == head_revision()
        with unmigrated.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []

    def test_unmigrated_database_gives_store_error_naming_operation(
        self, unmigrated: Engine
    ) -> None:
        assert schema_revision(unmigrated) is None
        with Session(unmigrated) as session, pytest.raises(StoreError, match="load inventories"):
            load_inventories(session)

    @pytest.mark.parametrize(
        "inventory",
        [
            pytest.param(NODE_A, id="two-devices-labels"),
            pytest.param(
                NodeInventory(
                    name="node-b",
                    devices=(
                        gpu("GPU-b0", index=0, numa=0, mode="mig"),
                        gpu("GPU-b1", index=1, numa=1, count=4, memory=40960, cores=200),
                    ),
                    cordoned=frozenset({"GPU-b1"}),
                ),
                id="cordoned-numa-mode",
            ),
            pytest.param(NodeInventory(name="node-c", problem="no annotation"), id="problem"),
        ],
    )
    def test_inventory_round_trip(self, db: Db, inventory: NodeInventory) -> None:
        put_node(db, inventory)
        with db.factory() as session:
            assert load_inventories(session) == [inventory]

    def test_upsert_replaces_devices_and_labels(self, db: Db) -> None:
        put_node(db)
        second = NodeInventory(
            name="node-a", devices=(gpu("GPU-a1", index=0, memory=4096), gpu("GPU-a2", index=1))
        )
        put_node(db, second)
        with db.factory() as session:
            assert load_inventories(session) == [second]

    def test_device_vanishing_while_held_stays_as_unhealthy(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a1", 1000, 0)]))
        put_node(db, replace(NODE_A, devices=(gpu("GPU-a0"),)))
        with db.factory() as session:
            devices = load_inventories(session)[0].devices
        assert [(d.uuid, d.healthy) for d in devices] == [("GPU-a0", True), ("GPU-a1", False)]
        with db.factory.begin() as session:
            assert release(session, pod_uid="p1") == 1
        put_node(db, replace(NODE_A, devices=(gpu("GPU-a0"),)))
        with db.factory() as session:
            assert [d.uuid for d in load_inventories(session)[0].devices] == ["GPU-a0"]

    def test_device_owned_by_another_node_is_refused(self, db: Db) -> None:
        put_node(db)
        with db.factory.begin() as session, pytest.raises(StoreConflict, match="on node node-a"):
            upsert_node(
                session,
                inventory=NodeInventory(name="node-b", devices=(gpu("GPU-a0"),)),
                source="file",
            )

    @pytest.mark.parametrize(
        ("inventory", "source", "field"),
        [
            pytest.param(NODE_A, "bogus", "source", id="bad-source"),
            pytest.param(replace(NODE_A, name=""), "api", "name", id="empty-name"),
            pytest.param(
                replace(NODE_A, devices=(gpu("GPU-a0", count=0),)),
                "api",
                "devices[0].count",
                id="zero-count",
            ),
            pytest.param(
                replace(NODE_A, devices=(gpu("GPU-a0", memory=-1),)),
                "api",
                "devices[0].memory_mib",
                id="negative-memory",
            ),
            pytest.param(
                replace(NODE_A, devices=(gpu("GPU-a0"), gpu("GPU-a0"))),
                "api",
                "devices[1].uuid",
                id="duplicate-uuid",
            ),
        ],
    )
    def test_bad_inventory_is_refused_by_field(
        self, db: Db, inventory: NodeInventory, source: str, field: str
    ) -> None:
        with db.factory.begin() as session, pytest.raises(StoreInputError) as caught:
            upsert_node(session, inventory=inventory, source=source)
        assert caught.value.field == field
        with db.factory() as session:
            assert load_inventories(session) == []

    def test_remove_node_drops_devices_and_released_rows(self, db: Db) -> None:
        put_node(db)
        put_node(db, NodeInventory(name="node-b", devices=(gpu("GPU-b0"),)))
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        do_reserve(db, "p2", grants("node-b", [("GPU-b0", 1000, 0)]))
        with db.factory.begin() as session:
            release(session, pod_uid="p1", now=T0)
        with db.factory.begin() as session:
            assert remove_node(session, name="node-a") is NodeRemoval.REMOVED
            assert remove_node(session, name="node-a") is NodeRemoval.UNKNOWN
        with db.factory() as session:
            assert [n.name for n in load_inventories(session)] == ["node-b"]
        assert [row[0] for row in live(db)] == ["p2"]

    def test_a_node_removed_while_pods_hold_it_stays_marked_absent(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        with db.factory.begin() as session:
            assert remove_node(session, name="node-a") is NodeRemoval.ABSENT
        with db.factory() as session:
            [kept] = load_inventories(session)
        assert (kept.name, kept.problem, len(kept.devices)) == ("node-a", NODE_ABSENT, 2)
        assert [row[0] for row in live(db)] == ["p1"]
        # Nothing new lands on an absent node.
        with db.factory.begin() as session, pytest.raises(StoreConflict) as refused:
            reserve(
                session,
                pod_uid="p2",
                namespace="ns",
                name="p2",
                assignment=grants("node-a", [("GPU-a1", 1000, 0)]),
            )
        assert refused.value.reason is Reason.INVENTORY
        # Registered again, the node takes pods, and p1 still counts.
        put_node(db)
        with db.factory() as session:
            assert load_inventories(session)[0].problem == ""
        with db.factory.begin() as session, pytest.raises(StoreConflict, match="memory 8500/8192"):
            reserve(
                session,
                pod_uid="p3",
                namespace="ns",
                name="p3",
                assignment=grants("node-a", [("GPU-a0", 7500, 0)]),
            )
        with db.factory.begin() as session:
            release(session, pod_uid="p1", now=T0)
            assert remove_node(session, name="node-a") is NodeRemoval.REMOVED

    @pytest.mark.parametrize(("inventory", "existing", "new", "reason", "message"), RESERVE_CASES)
    def test_reserve_rechecks_fit(
        self,
        db: Db,
        inventory: NodeInventory,
        existing: list[PodAssignment],
        new: PodAssignment,
        reason: Reason | None,
        message: str,
    ) -> None:
        put_node(db, inventory)
        for n, assignment in enumerate(existing):
            with db.factory.begin() as session:
                import_assignment(
                    session, pod_uid=f"old{n}", namespace="ns", name="old", assignment=assignment
                )
        if reason is None:
            do_reserve(db, "new", new)
            with db.factory() as session:
                stored = assignments(session)["new"]
            assert stored.assignment == new
            assert stored.meta.state is AllocationState.RESERVED
            return
        with pytest.raises(StoreConflict) as caught:
            do_reserve(db, "new", new)
        assert caught.value.reason is reason
        assert message in str(caught.value)
        assert str(caught.value).startswith("store reserve: ")
        assert [row for row in live(db) if row[0] == "new"] == []

    def test_init_containers_collapse_in_the_fit(self, db: Db) -> None:
        put_node(db)
        init_then_app = PodAssignment(
            node="node-a",
            containers=((DeviceGrant("GPU-a0", 6000, 0),), (DeviceGrant("GPU-a0", 6000, 0),)),
            init=(True, False),
        )
        do_reserve(db, "p1", init_then_app)
        with db.factory() as session:
            assert assignments(session)["p1"].assignment == init_then_app
        with pytest.raises(StoreConflict, match="memory 8200/8192 MiB"):
            do_reserve(db, "p2", grants("node-a", [("GPU-a0", 2200, 0)]))
        do_reserve(db, "p3", grants("node-a", [("GPU-a0", 2192, 0)]))

    @pytest.mark.parametrize("bind_first", [False, True], ids=["reserved", "bound"])
    def test_second_reserve_for_same_pod_refused(self, db: Db, bind_first: bool) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        if bind_first:
            with db.factory.begin() as session:
                assert mark_bound(session, pod_uid="p1") == 1
        with pytest.raises(AlreadyAllocated) as caught:
            do_reserve(db, "p1", grants("node-a", [("GPU-a1", 1000, 0)]))
        assert caught.value.state == ("bound" if bind_first else "reserved")
        assert [row[1] for row in live(db)] == ["GPU-a0"]

    def test_pod_can_be_reserved_again_after_release(self, db: Db) -> None:
        put_node(db)
        assignment = grants("node-a", [("GPU-a0", 1000, 0)])
        do_reserve(db, "p1", assignment)
        with db.factory.begin() as session:
            assert release(session, pod_uid="p1") == 1
        do_reserve(db, "p1", assignment)
        assert live(db) == [("p1", "GPU-a0", 1000, 0, AllocationState.RESERVED)]

    def test_bind_life_cycle(self, db: Db) -> None:
        put_node(db)
        assignment = grants("node-a", [("GPU-a0", 1000, 10), ("GPU-a1", 1000, 10)], [])
        with db.factory.begin() as session:
            reserve(
                session,
                pod_uid="p1",
                namespace="team",
                name="train",
                assignment=assignment,
                container_indices=[0, 1],
                now=T0,
            )
        with db.factory.begin() as session:
            assert mark_bound(session, pod_uid="p1", now=T0 + timedelta(seconds=1)) == 2
            assert mark_bound(session, pod_uid="p1") == 0
        with db.factory() as session:
            stored, meta = assignments(session)["p1"]
        # Trailing containers without grants leave no rows.
        assert stored == replace(assignment, containers=assignment.containers[:1])
        assert (meta.namespace, meta.name, meta.node, meta.state) == (
            "team",
            "train",
            "node-a",
            AllocationState.BOUND,
        )
        assert (meta.created_at, meta.bound_at) == (T0, T0 + timedelta(seconds=1))
        with db.factory.begin() as session:
            assert release(session, pod_uid="p1") == 2
            assert release(session, pod_uid="p1") == 0
        assert live(db) == []

    def test_mark_bound_without_reservation_is_a_conflict(self, db: Db) -> None:
        put_node(db)
        with db.factory.begin() as session, pytest.raises(StoreConflict, match="no reserved"):
            mark_bound(session, pod_uid="ghost")

    def test_mark_many_bound_marks_reserved_pods_and_names_those_with_nothing_live(
        self, db: Db
    ) -> None:
        put_node(db)
        do_reserve(db, "reserved", grants("node-a", [("GPU-a0", 1000, 0), ("GPU-a1", 1000, 0)]))
        do_reserve(db, "bound", grants("node-a", [("GPU-a0", 1000, 0)]))
        do_reserve(db, "released", grants("node-a", [("GPU-a1", 1000, 0)]))
        with db.factory.begin() as session:
            mark_bound(session, pod_uid="bound")
            release(session, pod_uid="released")
        uids = ["reserved", "bound", "released", "ghost", "reserved"]
        with db.factory.begin() as session:
            gone = mark_many_bound(session, pod_uids=uids, now=T0)
        assert gone == {"released", "ghost"}
        with db.factory() as session:
            states = {uid: meta.state for uid, (_a, meta) in assignments(session).items()}
        assert states == {"reserved": AllocationState.BOUND, "bound": AllocationState.BOUND}
        with db.factory.begin() as session:
            assert mark_many_bound(session, pod_uids=[]) == set()

    def test_delete_reservation_removes_only_reserved_rows(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        do_reserve(db, "p2", grants("node-a", [("GPU-a1", 1000, 0)]))
        with db.factory.begin() as session:
            mark_bound(session, pod_uid="p2")
        with db.factory.begin() as session:
            assert delete_reservation(session, pod_uid="p1") == 1
            assert delete_reservation(session, pod_uid="p2") == 0
        assert [row[0] for row in live(db)] == ["p2"]

    def test_expire_releases_only_old_unbound_reservations(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "old", grants("node-a", [("GPU-a0", 1000, 0)]), now=T0)
        do_reserve(db, "old-bound", grants("node-a", [("GPU-a0", 1000, 0)]), now=T0)
        do_reserve(
            db, "fresh", grants("node-a", [("GPU-a1", 1000, 0)]), now=T0 + timedelta(seconds=60)
        )
        with db.factory.begin() as session:
            mark_bound(session, pod_uid="old-bound")
        with db.factory.begin() as session:
            expired = expire_reservations(
                session, older_than=T0 + timedelta(seconds=30), now=T0 + timedelta(seconds=90)
            )
        assert expired == ["old"]
        assert sorted(row[0] for row in live(db)) == ["fresh", "old-bound"]

    def test_naive_timestamp_is_refused_by_name(self, db: Db) -> None:
        with db.factory.begin() as session, pytest.raises(StoreInputError) as caught:
            expire_reservations(session, older_than=datetime(2025, 1, 1))
        assert caught.value.field == "older_than"

    def test_import_refuses_a_pod_that_would_over_commit_and_writes_nothing(self, db: Db) -> None:
        put_node(db)
        with db.factory.begin() as session:
            import_assignment(
                session,
                pod_uid="first",
                namespace="ns",
                name="p",
                assignment=grants("node-a", [("GPU-a0", 6000, 0)]),
            )
        taken = grants("node-a", [("GPU-a0", 6000, 0), ("GPU-a1", 1000, 0)])
        with db.factory.begin() as session, pytest.raises(ImportConflict) as caught:
            import_assignment(session, pod_uid="second", namespace="ns", name="q", assignment=taken)
        conflict = caught.value
        assert (conflict.pod_uid, conflict.node) == ("second", "node-a")
        assert (conflict.devices, conflict.pods) == (("GPU-a0",), ("first",))
        assert conflict.reason is Reason.MEMORY
        assert "memory 12000/8192 MiB" in str(conflict)
        # Not a row of it, not even on the device it fits.
        assert live(db) == [("first", "GPU-a0", 6000, 0, AllocationState.BOUND)]
        # Once the first pod is gone, the same import fits.
        with db.factory.begin() as session:
            release(session, pod_uid="first", now=T0)
        with db.factory.begin() as session:
            import_assignment(session, pod_uid="second", namespace="ns", name="q", assignment=taken)
        assert [row[:2] for row in live(db)] == [("second", "GPU-a0"), ("second", "GPU-a1")]

    def test_import_of_a_pod_alone_over_a_device_names_no_holder(self, db: Db) -> None:
        put_node(db)
        big = grants("node-a", [("GPU-a0", 9000, 0)])
        with db.factory.begin() as session, pytest.raises(ImportConflict) as caught:
            import_assignment(session, pod_uid="hami", namespace="ns", name="p", assignment=big)
        assert (caught.value.devices, caught.value.pods) == (("GPU-a0",), ())
        assert live(db) == []
        with db.factory.begin() as session, pytest.raises(StoreConflict, match="GPU-zz"):
            import_assignment(
                session,
                pod_uid="x",
                namespace="ns",
                name="p",
                assignment=grants("node-a", [("GPU-zz", 1, 0)]),
            )

    def test_import_is_not_refused_by_health_cordon_or_an_absent_node(self, db: Db) -> None:
        sick = replace(
            NODE_A,
            devices=(gpu("GPU-a0", index=0), gpu("GPU-a1", index=1, healthy=False)),
            cordoned=frozenset({"GPU-a0"}),
        )
        put_node(db, sick)
        with db.factory.begin() as session:
            import_assignment(
                session,
                pod_uid="p1",
                namespace="ns",
                name="p1",
                assignment=grants("node-a", [("GPU-a0", 1000, 0)], [("GPU-a1", 1000, 0)]),
            )
            assert remove_node(session, name="node-a") is NodeRemoval.ABSENT
        with db.factory.begin() as session:
            import_assignment(
                session,
                pod_uid="p2",
                namespace="ns",
                name="p2",
                assignment=grants("node-a", [("GPU-a0", 1000, 0)]),
            )
        assert sorted({row[0] for row in live(db)}) == ["p1", "p2"]

    @pytest.mark.parametrize(
        ("uid", "assignment", "indices", "field"),
        [
            pytest.param("", grants("node-a", [("GPU-a0", 1, 0)]), None, "pod_uid", id="no-uid"),
            pytest.param(
                "p",
                grants("node-a", [("GPU-a0", 1, 0)]),
                [0, 1],
                "container_indices",
                id="indices-length",
            ),
            pytest.param(
                "p",
                grants("node-a", [("GPU-a0", 1, 0)], []),
                [1, 1],
                "container_indices",
                id="indices-repeat",
            ),
            pytest.param(
                "p",
                grants("node-a", [("GPU-a0", -5, 0)]),
                None,
                "assignment.containers[0].memory_mib",
                id="negative-memory",
            ),
            pytest.param(
                "p",
                grants("node-a", [("GPU-a0", 1, 0), ("GPU-a0", 1, 0)]),
                None,
                "assignment.containers[0].uuid",
                id="repeated-device",
            ),
            pytest.param("p", grants("node-a", []), None, "assignment.containers", id="no-grant"),
        ],
    )
    def test_bad_reservation_is_refused_by_field(
        self, db: Db, uid: str, assignment: PodAssignment, indices: list[int] | None, field: str
    ) -> None:
        put_node(db)
        with db.factory.begin() as session, pytest.raises(StoreInputError) as caught:
            reserve(
                session,
                pod_uid=uid,
                namespace="ns",
                name="p",
                assignment=assignment,
                container_indices=indices,
            )
        assert caught.value.field == field
        assert live(db) == []

    def test_concurrent_reserves_never_over_allocate(self, db: Db) -> None:
        """Eight binds race for two 8192 MiB devices, 3000 MiB each: two fit per device."""
        put_node(db)
        workers = 8
        barrier = threading.Barrier(workers)
        outcomes: list[str] = []
        lock = threading.Lock()

        def bind(n: int) -> None:
            device = f"GPU-a{n % 2}"
            barrier.wait()
            try:
                do_reserve(db, f"p{n}", grants("node-a", [(device, 3000, 0)]))
                outcome = "ok"
            except StoreConflict as exc:
                outcome = exc.reason.name if exc.reason else "conflict"
            with lock:
                outcomes.append(outcome)

        threads = [threading.Thread(target=bind, args=(n,)) for n in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["MEMORY"] * 4 + ["ok"] * 4
        per_device: dict[str, int] = {}
        for _uid, device, memory, _cores, _state in live(db):
            per_device[device] = per_device.get(device, 0) + memory
        assert per_device == {"GPU-a0": 6000, "GPU-a1": 6000}

    # ------------------------------------------------------------ reserve_all
    def test_reserve_all_checks_each_pod_against_those_before_it(self, db: Db) -> None:
        """8192 MiB on GPU-a0: 5000 fits, 4000 more does not, 3000 more does."""
        put_node(db)
        pods = [
            _pod("p1", grants("node-a", [("GPU-a0", 5000, 0)])),
            _pod("p2", grants("node-a", [("GPU-a0", 4000, 0)])),
            _pod("p3", grants("node-a", [("GPU-a0", 3000, 0)])),
            _pod("p4", grants("node-a", [("GPU-a1", 1000, 10)])),
        ]
        refusals = _reserve_all(db, pods)
        assert refusals[0] is None and refusals[2] is None and refusals[3] is None
        refused = refusals[1]
        assert isinstance(refused, StoreConflict)
        assert refused.reason is Reason.MEMORY
        assert "memory 9000/8192 MiB" in str(refused)
        assert str(refused).startswith("store reserve: ")
        assert sorted(live(db)) == [
            ("p1", "GPU-a0", 5000, 0, AllocationState.RESERVED),
            ("p3", "GPU-a0", 3000, 0, AllocationState.RESERVED),
            ("p4", "GPU-a1", 1000, 10, AllocationState.RESERVED),
        ]
        with db.factory() as session:
            stored = assignments(session)
        assert stored["p1"].meta.name == "pod-p1"
        assert stored["p4"].assignment == pods[3].assignment

    def test_reserve_all_gives_a_mutex_pod_only_devices_no_other_pod_holds(self, db: Db) -> None:
        """HAMi's mutex policy, re-checked at commit: GPU-a0 is held (committed, then by a
        pod earlier in the batch), GPU-a1 is free; the policy binds only the pod asking."""
        put_node(db)
        do_reserve(db, "old", grants("node-a", [("GPU-a0", 1000, 0)]))
        mutex = [
            replace(_pod("m1", grants("node-a", [("GPU-a0", 1000, 0)])), mutex=True),
            replace(_pod("m2", grants("node-a", [("GPU-a1", 1000, 0)])), mutex=True),
            replace(_pod("m3", grants("node-a", [("GPU-a1", 1000, 0)])), mutex=True),
            _pod("p4", grants("node-a", [("GPU-a1", 1000, 0)])),
        ]
        refusals = _reserve_all(db, mutex)
        for refused, device in ((refusals[0], "GPU-a0"), (refusals[2], "GPU-a1")):
            assert isinstance(refused, StoreConflict) and refused.reason is Reason.EXCLUSIVE
            assert f"device {device} on node-a is in use" in str(refused)
            assert "mutex policy needs an unused device" in str(refused)
        assert refusals[1] is None and refusals[3] is None
        assert sorted(row[0] for row in live(db)) == ["m2", "old", "p4"]

    def test_reserve_all_counts_what_is_committed(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "old", grants("node-a", [("GPU-a0", 6000, 0)]))
        refusals = _reserve_all(
            db,
            [
                _pod("p1", grants("node-a", [("GPU-a0", 3000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a0", 2192, 0)])),
            ],
        )
        assert isinstance(refusals[0], StoreConflict) and refusals[0].reason is Reason.MEMORY
        assert refusals[1] is None
        assert sorted(row[0] for row in live(db)) == ["old", "p2"]

    def test_reserve_all_refuses_a_pod_already_allocated_and_writes_the_others(
        self, db: Db
    ) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        refusals = _reserve_all(
            db,
            [
                _pod("p1", grants("node-a", [("GPU-a1", 1000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a1", 1000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a0", 1000, 0)])),  # the same pod again
            ],
        )
        assert isinstance(refusals[0], AlreadyAllocated) and refusals[0].state == "reserved"
        assert refusals[1] is None
        assert isinstance(refusals[2], AlreadyAllocated) and refusals[2].pod_uid == "p2"
        assert sorted(live(db)) == [
            ("p1", "GPU-a0", 1000, 0, AllocationState.RESERVED),
            ("p2", "GPU-a1", 1000, 0, AllocationState.RESERVED),
        ]

    def test_reserve_all_counts_a_refused_pods_live_rows_for_the_others(self, db: Db) -> None:
        """A pod refused as already allocated still holds its devices."""
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 8000, 0)]))
        refusals = _reserve_all(
            db,
            [
                _pod("p1", grants("node-a", [("GPU-a0", 8000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a0", 1000, 0)])),
            ],
        )
        assert isinstance(refusals[0], AlreadyAllocated)
        assert isinstance(refusals[1], StoreConflict) and refusals[1].reason is Reason.MEMORY

    def test_reserve_all_replaces_released_rows_of_its_pods(self, db: Db) -> None:
        put_node(db)
        do_reserve(db, "p1", grants("node-a", [("GPU-a0", 1000, 0)]))
        do_reserve(db, "p2", grants("node-a", [("GPU-a1", 1000, 0)]))
        with db.factory.begin() as session:
            release(session, pod_uid="p1")
            release(session, pod_uid="p2")
        refusals = _reserve_all(
            db,
            [
                _pod("p1", grants("node-a", [("GPU-a0", 2000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a1", 2000, 0)])),
                _pod("p3", grants("node-a", [("GPU-a1", 2000, 0)])),
            ],
        )
        assert refusals == [None, None, None]
        assert sorted(live(db)) == [
            ("p1", "GPU-a0", 2000, 0, AllocationState.RESERVED),
            ("p2", "GPU-a1", 2000, 0, AllocationState.RESERVED),
            ("p3", "GPU-a1", 2000, 0, AllocationState.RESERVED),
        ]

    @pytest.mark.parametrize("count", [1, 2, 3, 5, 9])
    def test_reserve_all_takes_any_number_of_pods_and_devices(self, db: Db, count: int) -> None:
        """The read is compiled per padded list length: every count reads right."""
        devices = tuple(gpu(f"GPU-a{i}", index=i, count=2) for i in range(count))
        put_node(db, NodeInventory(name="node-a", devices=devices))
        pods = [_pod(f"p{i}", grants("node-a", [(f"GPU-a{i}", 100, 0)])) for i in range(count)]
        crowded = _pod("extra", grants("node-a", [(f"GPU-a{i}", 1, 0) for i in range(count)]))
        one_more = _pod("third", grants("node-a", [(f"GPU-a{count - 1}", 1, 0)]))
        refusals = _reserve_all(db, [*pods, crowded, one_more])
        # Two slots per device: the pod and "extra" fill each; "third" finds no slot.
        assert refusals[:-1] == [None] * (count + 1)
        assert isinstance(refusals[-1], StoreConflict) and refusals[-1].reason is Reason.SLOTS
        assert len(live(db)) == 2 * count

    def test_reserve_all_refuses_every_pod_on_an_unknown_node(self, db: Db) -> None:
        put_node(db)
        pods = [
            _pod("p1", grants("node-x", [("GPU-x0", 1000, 0)])),
            _pod("p2", grants("node-x", [("GPU-x1", 1000, 0)])),
        ]
        refusals = _reserve_all(db, pods)
        assert all(
            isinstance(r, StoreConflict) and r.reason is Reason.UNKNOWN_NODE for r in refusals
        )
        assert "node node-x is not registered" in str(refusals[0])
        assert live(db) == []

    def test_reserve_all_refuses_a_malformed_pod_alone(self, db: Db) -> None:
        put_node(db)
        refusals = _reserve_all(
            db,
            [
                _pod("", grants("node-a", [("GPU-a0", 1000, 0)])),
                _pod("p2", grants("node-a", [("GPU-a0", 1000, 0)])),
            ],
        )
        assert isinstance(refusals[0], StoreInputError) and refusals[0].field == "pod_uid"
        assert str(refusals[0]).startswith("store reserve: ")
        assert refusals[1] is None
        assert [row[0] for row in live(db)] == ["p2"]

    def test_reserve_all_refuses_pods_of_several_nodes(self, db: Db) -> None:
        put_node(db)
        pods = [
            _pod("p1", grants("node-a", [("GPU-a0", 1000, 0)])),
            _pod("p2", grants("node-b", [("GPU-b0", 1000, 0)])),
        ]
        with pytest.raises(StoreInputError, match="must be for one node") as caught:
            _reserve_all(db, pods)
        assert caught.value.field == "reservations"
        assert live(db) == []

    def test_reserve_all_of_nothing_writes_nothing(self, db: Db) -> None:
        assert _reserve_all(db, []) == []


def _pod(uid: str, assignment: PodAssignment) -> Reservation:
    return Reservation(uid, "ns", f"pod-{uid}", assignment)


def _reserve_all(db: Db, pods: Sequence[Reservation]) -> list[StoreError | None]:
    with db.engine.begin() as connection:
        return reserve_all(connection, pods, now=T0)
