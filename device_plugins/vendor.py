"""The node agent's one door to the vendor's codecs: the vendor seam, by name.

The agent reads and writes HAMi's annotations (the inventory it registers, the devices
the scheduler assigned in ``to-allocate``) with the codecs of the vendor the registry
builds (``vgpu_extender.vendors.registry``), through the ``Vendor`` protocol; it never
imports a vendor's codec module itself. ``NvidiaConfig`` (names and defaults, no
codec) stays the agent's configuration type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.vendors.ascend import AscendChipVendor
from vgpu_extender.vendors.ascend.allocation_codec import (
    allocated_annotation,
    to_allocate_annotation,
)
from vgpu_extender.vendors.base import Vendor
from vgpu_extender.vendors.nvidia.config import NvidiaConfig
from vgpu_extender.vendors.registry import create_vendor, create_vendors

#: HAMi's bind phase while the node agent hands out a bound pod's devices; the
#: extender writes the same word at bind (tests/device_plugins/test_vendor_seam.py).
BIND_PHASE_ALLOCATING = "allocating"


def nvidia(config: NvidiaConfig | None = None) -> Vendor:
    """NVIDIA's codecs for ``config`` (the defaults when None), built by the registry."""
    if config is None:
        return create_vendor("nvidia")
    values = {item.name: getattr(config, item.name) for item in dataclasses.fields(config)}
    return create_vendor("nvidia", values)


def ascend(settings: Mapping[str, Any] | None = None) -> tuple[AscendChipVendor, ...]:
    """Ascend's codecs, one vendor per configured chip (``vnpus``), built by the registry."""
    return tuple(
        vendor
        for vendor in create_vendors("ascend", settings)
        if isinstance(vendor, AscendChipVendor)
    )


def ascend_pod_names(vendor: AscendChipVendor) -> NvidiaConfig:
    """HAMi's pod annotation names, as ``NvidiaConfig`` holds them for the pending-pod
    search, with the chip's device keys (``hami.io/<CW>-devices-to-allocate``)."""
    chip = vendor.chip
    return NvidiaConfig(
        count_resource=chip.resource_name,
        to_allocate_annotation=to_allocate_annotation(chip),
        allocated_annotation=allocated_annotation(chip),
        vendor_word=chip.common_word,
    )


def encode_containers(
    vendor: Vendor, containers: Sequence[Sequence[DeviceGrant]], *, node: str
) -> str:
    """The device annotation value for these containers' grants, in their order."""
    assignment = PodAssignment(node=node, containers=tuple(tuple(c) for c in containers))
    return vendor.encode_assignment(assignment)
