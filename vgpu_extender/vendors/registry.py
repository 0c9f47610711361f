"""Vendors by name: one literal map from name to factory, chosen by configuration.

A factory takes the vendor's settings as a plain mapping and validates them when it
builds the vendor, so a bad setting fails at start-up rather than on the first pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.base import Vendor
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

VendorFactory = Callable[[Mapping[str, Any]], Vendor]


def _nvidia(settings: Mapping[str, Any]) -> Vendor:
    return NvidiaVendor(NvidiaConfig.from_mapping(settings))


#: Name -> factory. Read-only: adding a vendor is one entry here.
VENDORS: Mapping[str, VendorFactory] = MappingProxyType({"nvidia": _nvidia})

#: The share model of an index or a store re-check built without one: the default
#: vendor's (the vendor set chosen by settings passes its own).
DEFAULT_SHARE: ShareModel = NVIDIA_SHARE


def create_vendor(name: str, settings: Mapping[str, Any] | None = None) -> Vendor:
    """Build the named vendor (case-insensitive); an unknown name lists the known ones."""
    factory = VENDORS.get(name.strip().lower()) if isinstance(name, str) else None
    if factory is None:
        raise ValueError(f"unknown vendor {name!r}; known: {', '.join(sorted(VENDORS))}")
    return factory(settings or {})
