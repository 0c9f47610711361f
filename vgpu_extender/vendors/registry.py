"""Vendors by name: one literal map from name to factory, chosen by configuration.

A factory takes the vendor's settings as a plain mapping and validates them when it
builds the vendor, so a bad setting fails at start-up rather than on the first pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.amd.vendor import amd_vendors
from vgpu_extender.vendors.ascend import ascend_vendors
from vgpu_extender.vendors.awsneuron.vendor import awsneuron_vendors
from vgpu_extender.vendors.base import Vendor
from vgpu_extender.vendors.cambricon.vendor import cambricon_vendors
from vgpu_extender.vendors.enflame.vendor import enflame_vendors
from vgpu_extender.vendors.hygon.vendor import hygon_vendors
from vgpu_extender.vendors.iluvatar.vendor import iluvatar_vendors
from vgpu_extender.vendors.kunlun.vendor import kunlun_vendors
from vgpu_extender.vendors.metax.vendor import metax_vendors
from vgpu_extender.vendors.mthreads.vendor import mthreads_vendors
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE
from vgpu_extender.vendors.vendor_set import VendorSet

#: A factory builds one vendor, or several (Ascend: one per chip, each its own word).
VendorFactory = Callable[[Mapping[str, Any]], "Vendor | tuple[Vendor, ...]"]


def _nvidia(settings: Mapping[str, Any]) -> Vendor:
    return NvidiaVendor(NvidiaConfig.from_mapping(settings))


#: Name -> factory. Read-only: adding a vendor is one entry here.
VENDORS: Mapping[str, VendorFactory] = MappingProxyType(
    {
        "nvidia": _nvidia,
        "ascend": ascend_vendors,
        "cambricon": cambricon_vendors,
        "hygon": hygon_vendors,
        "iluvatar": iluvatar_vendors,
        "metax": metax_vendors,
        "enflame": enflame_vendors,
        "kunlun": kunlun_vendors,
        "mthreads": mthreads_vendors,
        "awsneuron": awsneuron_vendors,
        "amd": amd_vendors,
    }
)

#: The share model of an index or a store re-check built without one: the default
#: vendor's (the vendor set chosen by settings passes its own).
DEFAULT_SHARE: ShareModel = NVIDIA_SHARE


def vendor_names(names: str) -> tuple[str, ...]:
    """The vendor names of a comma-separated setting (``nvidia,ascend``), lower case, in
    order; an unknown or repeated name lists the known ones."""
    if not isinstance(names, str):
        raise ValueError(f"vendor names must be a string, got {names!r}")
    listed = tuple(part.strip().lower() for part in names.split(","))
    if not listed or any(not name for name in listed):
        raise ValueError(f"no vendor named in {names!r}; known: {', '.join(sorted(VENDORS))}")
    for name in listed:
        if name not in VENDORS:
            raise ValueError(f"unknown vendor {name!r}; known: {', '.join(sorted(VENDORS))}")
    if len(set(listed)) != len(listed):
        raise ValueError(f"a vendor is named twice in {names!r}")
    return listed


def create_vendors(name: str, settings: Mapping[str, Any] | None = None) -> tuple[Vendor, ...]:
    """Every vendor the named factory builds (case-insensitive)."""
    factory = VENDORS.get(name.strip().lower()) if isinstance(name, str) else None
    if factory is None:
        raise ValueError(f"unknown vendor {name!r}; known: {', '.join(sorted(VENDORS))}")
    built = factory(settings or {})
    return built if isinstance(built, tuple) else (built,)


def create_vendor(name: str, settings: Mapping[str, Any] | None = None) -> Vendor:
    """Build the named vendor (case-insensitive); an unknown name lists the known ones.
    A factory of several vendors (one per chip) is built with ``create_vendors``."""
    built = create_vendors(name, settings)
    if len(built) != 1:
        raise ValueError(f"vendor {name!r} has {len(built)} members; build them as a set")
    return built[0]


def create_vendor_set(
    names: str, settings: Callable[[str], Mapping[str, Any]] | None = None
) -> VendorSet:
    """The set of the named vendors (``nvidia,ascend``), each built with its settings."""
    members: list[Vendor] = []
    for name in vendor_names(names):
        members.extend(create_vendors(name, settings(name) if settings is not None else None))
    return VendorSet(members)
