"""Cambricon's pod annotations, as HAMi's ``PatchAnnotations`` writes them:
``hami.io/cambricon-mlu-devices-to-allocate`` and ``-allocated`` (HAMi's device
encoding, type ``MLU``), ``CAMBRICON_DSMLU_ASSIGNED: "false"`` and
``CAMBRICON_DSMLU_PROFILE: <index>_<cores>_<memory / 256>`` of the first device of the
first container that has one, which the vendor's plugin makes the dynamic sMLU from.

The index is the MLU's: the number that ends its id (``<node>-cambricon-mlu-<i>``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant
from vgpu_extender.vendors.cambricon.config import MEMORY_UNIT_MIB

TO_ALLOCATE_ANNOTATION = "hami.io/cambricon-mlu-devices-to-allocate"
ALLOCATED_ANNOTATION = "hami.io/cambricon-mlu-devices-allocated"
ASSIGNED_ANNOTATION = "CAMBRICON_DSMLU_ASSIGNED"
PROFILE_ANNOTATION = "CAMBRICON_DSMLU_PROFILE"
_INDEX = re.compile(r"(?:.*-)?([0-9]+)")


def device_index(uuid: str) -> int:
    """The MLU index an id ends with; ``AnnotationError`` for an id without one."""
    match = _INDEX.fullmatch(uuid)
    if match is None:
        raise AnnotationError(f"MLU id {uuid!r} does not end with its index", value=uuid)
    return int(match.group(1))


def profile(grant: DeviceGrant) -> str:
    """``<index>_<cores>_<memory in 256 MiB units>`` of one grant."""
    units = grant.memory_mib // MEMORY_UNIT_MIB
    return f"{device_index(grant.uuid)}_{grant.cores}_{units}"


def dsmlu_annotations(containers: Sequence[Sequence[DeviceGrant]]) -> dict[str, str]:
    """What the plugin makes the sMLU from; ``{}`` for a pod with no MLU."""
    first = next((grants for grants in containers if grants), None)
    if first is None:
        return {}
    return {ASSIGNED_ANNOTATION: "false", PROFILE_ANNOTATION: profile(first[0])}
