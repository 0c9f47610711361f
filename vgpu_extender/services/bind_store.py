"""The bind's store port over SQLAlchemy: ``BindStore`` as the store functions do it.

A round's transaction runs on a bare connection: the store writes rows with Core
statements, so a session's bookkeeping would be pure overhead. It survives a database
failover (``store.run_transaction``): run again when the connection is lost before
the commit, the rows read back when it is lost during the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from vgpu_extender import store
from vgpu_extender.services.bound_marker import BoundMarker
from vgpu_extender.services.cluster import ClusterState

if TYPE_CHECKING:  # the store's handles, as the store names them
    from vgpu_extender.store.sessions import Connection, Engine, Sessions


class SqlBindStore:
    """``BindStore`` on the extender's database; ``marker`` marks pods bound in the
    background (None: nothing to mark, the rows are written bound)."""

    def __init__(
        self,
        *,
        engine: Engine,
        sessions: Sessions,
        cluster: ClusterState,
        marker: BoundMarker | None,
        clock: Callable[[], datetime],
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self._cluster = cluster
        self._marker = marker
        self._clock = clock

    def commit(
        self, reservations: Sequence[store.Reservation], *, bound: bool
    ) -> list[store.StoreError | None]:
        def write(connection: Connection) -> list[store.StoreError | None]:
            refusals = store.reserve_all(
                connection, reservations, now=self._clock(), shares=self._cluster.index.shares
            )
            if bound:
                written = _written(reservations, refusals)
                store.mark_many_bound(connection, pod_uids=written, now=self._clock())
            return refusals

        def committed(refusals: list[store.StoreError | None]) -> bool:
            written = _written(reservations, refusals)
            with self._sessions() as session:
                return all(store.live_allocations(session, pod_uid=uid) for uid in written)

        return store.run_transaction(self._engine, write, committed=committed, operation="reserve")

    def delete_reservation(self, pod_uid: str) -> None:
        with self._engine.begin() as connection:
            store.delete_reservation(connection, pod_uid=pod_uid)

    def learn_node(self, node: str) -> None:
        self._cluster.refresh_node(self._sessions, node)

    def mark_bound(self, pod_uid: str) -> None:
        if self._marker is not None:
            self._marker.mark(pod_uid)


def _written(
    reservations: Sequence[store.Reservation], refusals: Sequence[store.StoreError | None]
) -> list[str]:
    return [r.pod_uid for r, refusal in zip(reservations, refusals, strict=True) if refusal is None]
