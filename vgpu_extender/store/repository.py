"""The store's data functions in one place.

Each takes the caller's ``Session`` first and keyword-only arguments after it, takes
and returns plain domain values, and never commits: the service that calls it owns
the unit of work (``with factory.begin() as session: ...``).
"""

from vgpu_extender.store.allocations import (
    NAMES_PER_READ,
    STATES_PER_READ,
    assignments,
    delete_reservation,
    expire_reservations,
    live_allocations,
    mark_bound,
    mark_many_bound,
    pod_names,
    pod_states,
    purge_released,
    release,
    reserved_since,
)
from vgpu_extender.store.nodes import (
    NODE_ABSENT,
    NodeRemoval,
    load_inventories,
    remove_node,
    upsert_node,
)
from vgpu_extender.store.reservations import (
    Reservation,
    import_assignment,
    reserve,
    reserve_all,
)

__all__ = [
    "NAMES_PER_READ",
    "NODE_ABSENT",
    "STATES_PER_READ",
    "NodeRemoval",
    "Reservation",
    "assignments",
    "delete_reservation",
    "expire_reservations",
    "import_assignment",
    "live_allocations",
    "load_inventories",
    "mark_bound",
    "mark_many_bound",
    "pod_names",
    "pod_states",
    "purge_released",
    "release",
    "remove_node",
    "reserve",
    "reserve_all",
    "reserved_since",
    "upsert_node",
]
