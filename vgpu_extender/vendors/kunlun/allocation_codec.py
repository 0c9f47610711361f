"""Kunlunxin pod annotations.

- ``kunlun``: only ``hami.io/kunlun-allocated`` (HAMi's device encoding), and
  ``BAIDU_COM_DEVICE_IDX``: the indexes of the last container given XPUs, comma
  separated (read from the IDs ``<node>-kunlun-<i>``). No node lock.
- ``XPU``: ``hami.io/xpu-devices-to-allocate`` and ``hami.io/xpu-devices-allocated``;
  the node lock is ``hami.io/mutex.lock``.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant
from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK

WHOLE_ALLOCATED = "hami.io/kunlun-allocated"
DEVICE_IDX = "BAIDU_COM_DEVICE_IDX"
WHOLE_NODE_LOCK: str | None = None
VXPU_TO_ALLOCATE = "hami.io/xpu-devices-to-allocate"
VXPU_ALLOCATED = "hami.io/xpu-devices-allocated"
VXPU_NODE_LOCK: str | None = MUTEX_LOCK
_ID = "-kunlun-"


def device_idx(containers: Sequence[Sequence[DeviceGrant]]) -> dict[str, str]:
    last = next((grants for grants in reversed(containers) if grants), None)
    if last is None:
        return {}
    return {DEVICE_IDX: ",".join(_index_of(grant.uuid) for grant in last)}


def _index_of(uuid: str) -> str:
    _, found, index = uuid.rpartition(_ID)
    if not found or not index.isdigit():
        raise AnnotationError("XPU id must end in -kunlun-<index>", value=uuid)
    return index
