"""Allocations as operators look for them: filtered, paginated, or one pod's.

The queries are the store's (``store.allocation_queries``: they select in SQL, so a
cluster with ten thousand pods never loads them all to show twenty); this is what
the admin API reads of them, with the row type it renders.
"""

from __future__ import annotations

from vgpu_extender.store.allocation_queries import (
    AllocationFilter,
    AllocationPage,
    allocation_page,
    pod_allocations,
)
from vgpu_extender.store.records import Allocation as AllocationRow
from vgpu_extender.store.records import AllocationState

__all__ = [
    "AllocationFilter",
    "AllocationPage",
    "AllocationRow",
    "AllocationState",
    "allocation_page",
    "pod_allocations",
]
