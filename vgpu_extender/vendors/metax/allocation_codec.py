"""MetaX pod annotations.

- ``Metax-GPU``: HAMi's device encoding under ``hami.io/metax-gpu-devices-to-allocate``
  and ``-allocated``; no node lock.
- ``Metax-SGPU``: the same under ``hami.io/metax-sgpu-devices-...``, plus
  ``metax-tech.com/gpu-devices-allocated``, per container (every position kept) a list
  of ``{"uuid","compute","vRam"}``, and ``metax-tech.com/predicate-time`` in Unix
  nanoseconds; the node lock is ``hami.io/mutex.lock``.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.hami_devices import go_json_string
from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK

GPU_TO_ALLOCATE = "hami.io/metax-gpu-devices-to-allocate"
GPU_ALLOCATED = "hami.io/metax-gpu-devices-allocated"
GPU_NODE_LOCK: str | None = None
SGPU_TO_ALLOCATE = "hami.io/metax-sgpu-devices-to-allocate"
SGPU_ALLOCATED = "hami.io/metax-sgpu-devices-allocated"
SGPU_NODE_LOCK: str | None = MUTEX_LOCK
DEVICES_ALLOCATED = "metax-tech.com/gpu-devices-allocated"
PREDICATE_TIME = "metax-tech.com/predicate-time"


def devices_allocated(containers: Sequence[Sequence[DeviceGrant]]) -> str:
    """``[[{"uuid":…,"compute":…,"vRam":…}],[]]``: one list per container."""
    return (
        "["
        + ",".join(
            "["
            + ",".join(
                f'{{"uuid":{go_json_string(g.uuid)},"compute":{g.cores},"vRam":{g.memory_mib}}}'
                for g in grants
            )
            + "]"
            for grants in containers
        )
        + "]"
    )


def sgpu_annotations(
    containers: Sequence[Sequence[DeviceGrant]], *, bind_time: int
) -> dict[str, str]:
    return {
        DEVICES_ALLOCATED: devices_allocated(containers),
        PREDICATE_TIME: str(bind_time * 1_000_000_000),
    }
