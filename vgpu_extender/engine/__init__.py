"""Pure placement: the cluster index, vectorised fit, device choice and score scaling.

No I/O and no clock: every function takes plain values and the index.
"""

from vgpu_extender.engine.choose import DeviceRanker, NodeState, by_index, choose_devices
from vgpu_extender.engine.fit import FitResult, fit, fitting_devices, static_mask
from vgpu_extender.engine.index import Allocation, AllocationError, ClusterIndex
from vgpu_extender.engine.scoring import (
    MAX_EXTENDER_PRIORITY,
    extender_score_vector,
    to_extender_scores,
)

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "Allocation",
    "AllocationError",
    "ClusterIndex",
    "DeviceRanker",
    "FitResult",
    "NodeState",
    "by_index",
    "choose_devices",
    "extender_score_vector",
    "fit",
    "fitting_devices",
    "static_mask",
    "to_extender_scores",
]
