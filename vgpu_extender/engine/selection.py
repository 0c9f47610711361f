"""Which devices a pod's selector allows, as a mask over the device grid."""

from __future__ import annotations

import numpy as np

from vgpu_extender.domain import DeviceSelector
from vgpu_extender.engine.columns import BoolGrid
from vgpu_extender.engine.index import ClusterIndex


def allowed_type_ids(index: ClusterIndex, selector: DeviceSelector) -> np.ndarray:
    """Ids of the registered device types the selector accepts (few types: a plain loop)."""
    return np.array(
        [tid for tid, name in enumerate(index.types) if selector.accepts_type(name)],
        dtype=np.int64,
    )


def type_mask(index: ClusterIndex, selector: DeviceSelector) -> BoolGrid | None:
    """Devices whose type the selector accepts, or None when it constrains no type."""
    if not selector.constrains_types:
        return None
    mask: BoolGrid = np.isin(index.cols.type_id, allowed_type_ids(index, selector))
    outside = _outside(index, selector)
    return mask if outside is None else mask | outside


def uuid_mask(index: ClusterIndex, selector: DeviceSelector) -> BoolGrid | None:
    """Devices whose UUID the selector accepts, or None when it constrains no UUID."""
    if not selector.constrains_uuids:
        return None
    cols = index.cols
    uuid_ok = np.zeros_like(cols.valid) if selector.use_uuids else cols.valid.copy()
    for uuid in selector.use_uuids:
        where = index.locate(uuid)
        if where is not None:
            uuid_ok[where] = True
    for uuid in selector.avoid_uuids:
        where = index.locate(uuid)
        if where is not None:
            uuid_ok[where] = False
    outside = _outside(index, selector)
    return uuid_ok if outside is None else uuid_ok | outside


def selector_mask(index: ClusterIndex, selector: DeviceSelector) -> BoolGrid | None:
    """Devices the selector accepts, or None when it accepts every device."""
    by_type = type_mask(index, selector)
    by_uuid = uuid_mask(index, selector)
    if by_type is None:
        return by_uuid
    return by_type if by_uuid is None else by_type & by_uuid


def _outside(index: ClusterIndex, selector: DeviceSelector) -> BoolGrid | None:
    """Devices a vendor-scoped selector does not judge (other vendors'), or None."""
    if not selector.vendor:
        return None
    judged = index.ask_mask(selector.vendor)
    if judged is None:
        return None
    outside: BoolGrid = ~judged
    return outside
