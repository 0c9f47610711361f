"""Moore Threads' pod annotations, as HAMi's ``PatchAnnotations`` writes them: only
``hami.io/mthreads-vgpu-devices-allocated`` (HAMi registers the to-allocate key but
never writes it), plus ``mthreads.com/gpu-index`` (the GPU indices of a container,
comma-joined; HAMi overwrites it container by container, so the last container with
GPUs is the one written), ``mthreads.com/predicate-time`` (Unix nanoseconds; here the
bind time's second) and ``mthreads.com/predicate-node``. No node lock is taken.

A GPU's index is the number that ends its id (``<node>-mthreads-<i>``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant

ALLOCATED_ANNOTATION = "hami.io/mthreads-vgpu-devices-allocated"
#: Registered by HAMi, never written.
TO_ALLOCATE_ANNOTATION = "hami.io/mthreads-vgpu-devices-to-allocate"
GPU_INDEX_ANNOTATION = "mthreads.com/gpu-index"
PREDICATE_TIME_ANNOTATION = "mthreads.com/predicate-time"
PREDICATE_NODE_ANNOTATION = "mthreads.com/predicate-node"
#: Set by HAMi's webhook on a pod asking for several GPUs in one container.
REQUEST_GPU_NUM_ANNOTATION = "mthreads.com/request-gpu-num"
_INDEX = re.compile(r"(?:.*-)?([0-9]+)")
_NANOS = 1_000_000_000


def device_index(uuid: str) -> int:
    """The GPU index an id ends with; ``AnnotationError`` for an id without one."""
    match = _INDEX.fullmatch(uuid)
    if match is None:
        raise AnnotationError(f"Moore Threads id {uuid!r} does not end with its index", value=uuid)
    return int(match.group(1))


def side_annotations(
    containers: Sequence[Sequence[DeviceGrant]], *, node: str, bind_time: int
) -> dict[str, str]:
    """The ``mthreads.com/*`` keys; ``{}`` for a pod with no GPU."""
    last = next((grants for grants in reversed(containers) if grants), None)
    if last is None:
        return {}
    return {
        GPU_INDEX_ANNOTATION: ",".join(str(device_index(grant.uuid)) for grant in last),
        PREDICATE_TIME_ANNOTATION: str(bind_time * _NANOS),
        PREDICATE_NODE_ANNOTATION: node,
    }
