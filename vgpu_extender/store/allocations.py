"""Allocation life cycle after the reservation: bind, release, expiry, and reads.

Every function works inside the caller's session and transaction; none commits. The
per-pod writes of a bind (mark bound, delete reservation) and release also take a bare
connection in a transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, delete, func, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from vgpu_extender.store.database import Unit, connection_of
from vgpu_extender.store.errors import StoreConflict, classify, store_operation
from vgpu_extender.store.models import AllocationModel, Base, DeviceModel
from vgpu_extender.store.records import (
    LIVE_STATES,
    Allocation,
    AllocationState,
    PodMeta,
    StoredPod,
)
from vgpu_extender.store.reservations import aware
from vgpu_extender.store.rows import POD_COLUMNS, stored_pods, to_allocation

_RESERVED = AllocationState.RESERVED.value
_BOUND = AllocationState.BOUND.value
_RELEASED = AllocationState.RELEASED.value

# The per-pod writes of every bind and release: Core statements on the table, built
# once, so nothing goes through the ORM's identity map on the hot path.
_a = Base.metadata.tables["allocations"]
_MARK_BOUND = (
    update(_a)
    .where(_a.c.pod_uid == bindparam("uid"), _a.c.state == _RESERVED)
    .values(state=_BOUND, bound_at=bindparam("stamp"), updated_at=bindparam("stamp"))
)
_ANY_BOUND = select(_a.c.id).where(_a.c.pod_uid == bindparam("uid"), _a.c.state == _BOUND).limit(1)
_MARK_MANY_BOUND = (
    update(_a)
    .where(_a.c.pod_uid.in_(bindparam("uids", expanding=True)), _a.c.state == _RESERVED)
    .values(state=_BOUND, bound_at=bindparam("stamp"), updated_at=bindparam("stamp"))
    .returning(_a.c.pod_uid)
)
_BOUND_AMONG = (
    select(_a.c.pod_uid)
    .distinct()
    .where(_a.c.pod_uid.in_(bindparam("uids", expanding=True)), _a.c.state == _BOUND)
)
_DELETE_RESERVED = delete(_a).where(_a.c.pod_uid == bindparam("uid"), _a.c.state == _RESERVED)
_RELEASE = (
    update(_a)
    .where(_a.c.pod_uid == bindparam("uid"), _a.c.state.in_(LIVE_STATES))
    .values(state=_RELEASED, released_at=bindparam("stamp"), updated_at=bindparam("stamp"))
)


@store_operation("mark bound")
def mark_bound(session: Unit, *, pod_uid: str, now: datetime | None = None) -> int:
    """Mark the pod's reserved rows bound; returns how many changed.

    Already bound is fine (0). A pod with nothing live raises ``StoreConflict``: its
    reservation expired or was released while the bind was in flight.
    """
    stamp = aware(now, field="now")
    connection = connection_of(session)
    changed = connection.execute(_MARK_BOUND, {"uid": pod_uid, "stamp": stamp}).rowcount
    if changed:
        return changed
    if connection.execute(_ANY_BOUND, {"uid": pod_uid}).first() is None:
        raise StoreConflict(f"pod {pod_uid} has no reserved allocations (expired or released)")
    return 0


@store_operation("mark bound")
def mark_many_bound(
    session: Unit, *, pod_uids: Sequence[str], now: datetime | None = None
) -> set[str]:
    """``mark_bound`` for many pods in one statement; returns the pods with nothing
    live (reservation expired or released meanwhile) instead of raising for them."""
    if not pod_uids:
        return set()
    stamp = aware(now, field="now")
    connection = connection_of(session)
    uids = list(dict.fromkeys(pod_uids))
    marked = set(connection.execute(_MARK_MANY_BOUND, {"uids": uids, "stamp": stamp}).scalars())
    rest = [uid for uid in uids if uid not in marked]
    if not rest:
        return set()
    already = set(connection.execute(_BOUND_AMONG, {"uids": rest}).scalars())
    return {uid for uid in rest if uid not in already}


@store_operation("release")
def release(session: Unit, *, pod_uid: str, now: datetime | None = None) -> int:
    """Release the pod's live rows (pod deleted or finished); returns how many."""
    stamp = aware(now, field="now")
    return connection_of(session).execute(_RELEASE, {"uid": pod_uid, "stamp": stamp}).rowcount


@store_operation("delete reservation")
def delete_reservation(session: Unit, *, pod_uid: str) -> int:
    """Undo a reservation whose bind failed: delete its reserved rows (bound ones stay)."""
    return connection_of(session).execute(_DELETE_RESERVED, {"uid": pod_uid}).rowcount


@store_operation("expire reservations")
def expire_reservations(
    session: Session, *, older_than: datetime, now: datetime | None = None
) -> list[str]:
    """Release reservations created before ``older_than`` that never got bound.

    Returns the affected pod uids, sorted.
    """
    cutoff = aware(older_than, field="older_than")
    stamp = aware(now, field="now")
    uids = session.scalars(
        update(AllocationModel)
        .where(AllocationModel.state == _RESERVED, AllocationModel.created_at < cutoff)
        .values(state=_RELEASED, released_at=stamp, updated_at=stamp)
        .returning(AllocationModel.pod_uid)
    ).all()
    return sorted(set(uids))


@store_operation("read reservations")
def reserved_since(session: Unit) -> list[datetime]:
    """When each pod still waiting for its Binding was reserved (its first row's time),
    oldest first: one grouped read of the reserved rows, however many pods are bound."""
    statement = (
        select(func.min(_a.c.created_at))
        .where(_a.c.state == _RESERVED)
        .group_by(_a.c.pod_uid)
        .order_by(func.min(_a.c.created_at))
    )
    return list(connection_of(session).scalars(statement))


@store_operation("purge released")
def purge_released(session: Session, *, older_than: datetime) -> int:
    """Delete released rows older than ``older_than`` (history kept for a while)."""
    cutoff = aware(older_than, field="older_than")
    return len(
        session.execute(
            delete(AllocationModel)
            .where(AllocationModel.state == _RELEASED, AllocationModel.released_at < cutoff)
            .returning(AllocationModel.id)
        ).all()
    )


@store_operation("live allocations")
def live_allocations(
    session: Session, *, node: str | None = None, pod_uid: str | None = None
) -> list[Allocation]:
    """Reserved and bound rows, optionally for one node or one pod, in a stable order."""
    query = select(AllocationModel).where(AllocationModel.state.in_(LIVE_STATES))
    if node is not None:
        query = query.where(AllocationModel.node == node)
    if pod_uid is not None:
        query = query.where(AllocationModel.pod_uid == pod_uid)
    query = query.order_by(
        AllocationModel.node,
        AllocationModel.pod_uid,
        AllocationModel.container_index,
        AllocationModel.id,
    )
    return [to_allocation(row) for row in session.scalars(query)]


@store_operation("assignments")
def assignments(session: Session, *, node: str | None = None) -> dict[str, StoredPod]:
    """Every live pod's assignment and metadata, keyed by pod uid (to rebuild the index)."""
    # Each row carries its grant's vendor word; the join only keeps out a row whose
    # device is gone (none while the foreign key cascades), as it always has.
    query = (
        select(*POD_COLUMNS)
        .join(DeviceModel, DeviceModel.uuid == AllocationModel.device_uuid)
        .where(AllocationModel.state.in_(LIVE_STATES))
    )
    if node is not None:
        query = query.where(AllocationModel.node == node)
    return stored_pods(session.execute(query))


#: Per live pod: its first row's who and where, how many of its rows are not bound,
#: when its first row was made and its last bound (``meta_of``'s fields, in SQL).
_POD_STATES = (
    select(
        AllocationModel.pod_uid,
        func.min(AllocationModel.namespace),
        func.min(AllocationModel.pod_name),
        func.min(AllocationModel.node),
        func.sum(case((AllocationModel.state == _BOUND, 0), else_=1)),
        func.min(AllocationModel.created_at),
        func.max(AllocationModel.bound_at),
    )
    .join(DeviceModel, DeviceModel.uuid == AllocationModel.device_uuid)
    .where(AllocationModel.state.in_(LIVE_STATES))
    .group_by(AllocationModel.pod_uid)
    .order_by(AllocationModel.pod_uid)
)
#: Pods one read of ``pod_states`` returns at most, when read a page at a time: about a
#: millisecond of work each (a read is one call the verbs wait for, and on SQLite every
#: transaction, a read too, holds the database's write lock).
STATES_PER_READ = 128


#: Pods whose names one statement reads, at most (SQLite's bound-parameter limit was 999).
NAMES_PER_READ = 500
_NAMES_OF = (
    select(_a.c.pod_uid, _a.c.namespace, _a.c.pod_name)
    .distinct()
    .where(_a.c.pod_uid.in_(bindparam("uids", expanding=True)))
)


@store_operation("read pods' names")
def pod_names(session: Unit, uids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``(namespace, name)`` of each pod of ``uids`` that has rows (any state: a uid
    names one pod for good), in reads of ``NAMES_PER_READ``."""
    wanted = sorted(set(uids))
    connection = connection_of(session)
    names: dict[str, tuple[str, str]] = {}
    for start in range(0, len(wanted), NAMES_PER_READ):
        chunk = wanted[start : start + NAMES_PER_READ]
        for uid, namespace, name in connection.execute(_NAMES_OF, {"uids": chunk}):
            names[uid] = (namespace, name)
    return names


@store_operation("pod states")
def pod_states(session: Session, *, after: str = "", limit: int | None = None) -> Iterator[PodMeta]:
    """Every live pod's metadata, one row per pod, by pod UID: ``assignments`` without
    the assignments (the periodic reconcile reads every pod's, and building 100,000
    assignments took most of its time); only the pods after ``after``, at most ``limit``
    of them, to read a page at a time (``STATES_PER_READ``, ``after`` the last UID of
    the page before). The rows are fetched now, in the caller's transaction, and made
    metadata as the caller iterates, so that it can pause between them after the
    transaction is over (on SQLite every transaction, a read too, holds the database's
    write lock: binds would wait through the pauses)."""
    query = _POD_STATES
    if after:
        query = query.where(AllocationModel.pod_uid > after)
    if limit is not None:
        query = query.limit(limit)
    return _pod_states(session.execute(query).all())


def _pod_states(rows: Iterable[Any]) -> Iterator[PodMeta]:
    bound, reserved = AllocationState.BOUND, AllocationState.RESERVED
    try:
        for uid, namespace, name, node, unbound, created_at, bound_at in rows:
            yield PodMeta(
                uid=uid,
                namespace=namespace,
                name=name,
                node=node,
                state=reserved if unbound else bound,
                created_at=created_at,
                bound_at=None if unbound else bound_at,
            )
    except sa_exc.SQLAlchemyError as exc:  # as ``store_operation`` does for a call
        raise classify(exc, "pod states") from exc
