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


def selector_mask(index: ClusterIndex, selector: DeviceSelector) -> BoolGrid | None:
    """Devices the selector accepts, or None when it accepts every device."""
    cols = index.cols
    mask: BoolGrid | None = None
    if selector.constrains_types:
        mask = np.isin(cols.type_id, allowed_type_ids(index, selector))
    if selector.constrains_uuids:
        uuid_ok = np.zeros_like(cols.valid) if selector.use_uuids else cols.valid.copy()
        for uuid in selector.use_uuids:
            where = index.locate(uuid)
            if where is not None:
                uuid_ok[where] = True
        for uuid in selector.avoid_uuids:
            where = index.locate(uuid)
            if where is not None:
                uuid_ok[where] = False
        mask = uuid_ok if mask is None else mask & uuid_ok
    return mask
