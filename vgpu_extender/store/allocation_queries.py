"""Allocations as operators look for them: filtered, paginated, or one pod's.

The store's own reads serve the scheduler (everything, or one node); these select in
SQL by namespace, pod, node and device, count the matches and return one page, so a
cluster with ten thousand pods never loads them all to show twenty.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, sessionmaker

from vgpu_extender.store.models import AllocationModel
from vgpu_extender.store.records import LIVE_STATES, Allocation
from vgpu_extender.store.rows import to_allocation


@dataclass(frozen=True, slots=True)
class AllocationFilter:
    """Exact matches; ``None`` leaves a field unconstrained."""

    namespace: str | None = None
    pod: str | None = None
    node: str | None = None
    device: str | None = None


@dataclass(frozen=True, slots=True)
class AllocationPage:
    items: list[Allocation]
    total: int
    offset: int
    limit: int


def _live(where: AllocationFilter) -> Select[AllocationModel]:
    query = select(AllocationModel).where(AllocationModel.state.in_(LIVE_STATES))
    if where.namespace is not None:
        query = query.where(AllocationModel.namespace == where.namespace)
    if where.pod is not None:
        query = query.where(AllocationModel.pod_name == where.pod)
    if where.node is not None:
        query = query.where(AllocationModel.node == where.node)
    if where.device is not None:
        query = query.where(AllocationModel.device_uuid == where.device)
    return query


def allocation_page(
    sessions: sessionmaker[Session], where: AllocationFilter, *, offset: int, limit: int
) -> AllocationPage:
    """Live allocations matching ``where``, ordered by node, pod and container."""
    query = _live(where)
    with sessions() as session:
        total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
        rows = session.scalars(
            query.order_by(
                AllocationModel.node,
                AllocationModel.namespace,
                AllocationModel.pod_name,
                AllocationModel.container_index,
                AllocationModel.id,
            )
            .offset(offset)
            .limit(limit)
        ).all()
        items = [to_allocation(row) for row in rows]
    return AllocationPage(items=items, total=total, offset=offset, limit=limit)


def pod_allocations(
    sessions: sessionmaker[Session], *, namespace: str, name: str
) -> list[Allocation]:
    """The live allocations of the pod ``namespace/name`` ([] when it holds none)."""
    query = _live(AllocationFilter(namespace=namespace, pod=name)).order_by(
        AllocationModel.container_index, AllocationModel.id
    )
    with sessions() as session:
        return [to_allocation(row) for row in session.scalars(query)]
