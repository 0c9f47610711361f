"""Durable state: node inventories and allocations in SQLite or PostgreSQL.

The engine's in-memory index is rebuilt from here on start; binds write here first.
"""

from vgpu_extender.store.database import (
    DEFAULT_URL,
    begin_immediate,
    make_engine,
    parse_url,
    session_factory,
)
from vgpu_extender.store.errors import (
    FAILURES,
    AlreadyAllocated,
    DriverError,
    ImportConflict,
    StoreConflict,
    StoreError,
    StoreInputError,
)
from vgpu_extender.store.failover import is_disconnect, run_transaction
from vgpu_extender.store.migrate import head_revision, migrate, schema_revision
from vgpu_extender.store.records import (
    LIVE_STATES,
    Allocation,
    AllocationState,
    PodMeta,
    StoredPod,
)
from vgpu_extender.store.repository import (
    NODE_ABSENT,
    NodeRemoval,
    Reservation,
    assignments,
    delete_reservation,
    expire_reservations,
    import_assignment,
    live_allocations,
    load_inventories,
    mark_bound,
    mark_many_bound,
    pod_names,
    pod_states,
    purge_released,
    release,
    remove_node,
    reserve,
    reserve_all,
    reserved_since,
    upsert_node,
)
from vgpu_extender.store.sessions import Sessions

__all__ = [
    "DEFAULT_URL",
    "FAILURES",
    "LIVE_STATES",
    "NODE_ABSENT",
    "Allocation",
    "AllocationState",
    "AlreadyAllocated",
    "DriverError",
    "ImportConflict",
    "NodeRemoval",
    "PodMeta",
    "Reservation",
    "Sessions",
    "StoreConflict",
    "StoreError",
    "StoreInputError",
    "StoredPod",
    "assignments",
    "begin_immediate",
    "delete_reservation",
    "expire_reservations",
    "head_revision",
    "import_assignment",
    "is_disconnect",
    "live_allocations",
    "load_inventories",
    "make_engine",
    "mark_bound",
    "mark_many_bound",
    "migrate",
    "parse_url",
    "pod_names",
    "pod_states",
    "purge_released",
    "release",
    "remove_node",
    "reserve",
    "reserve_all",
    "reserved_since",
    "run_transaction",
    "schema_revision",
    "session_factory",
    "upsert_node",
]
