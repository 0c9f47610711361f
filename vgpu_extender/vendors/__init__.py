"""Accelerator vendors as named plug-ins: request parsing and annotation codecs."""

from vgpu_extender.vendors.base import AdmissionNames, NodeFacts, Vendor
from vgpu_extender.vendors.registry import (
    VENDORS,
    VendorFactory,
    create_vendor,
    create_vendor_set,
    create_vendors,
)
from vgpu_extender.vendors.vendor_set import VendorSet

__all__ = [
    "VENDORS",
    "AdmissionNames",
    "NodeFacts",
    "Vendor",
    "VendorFactory",
    "VendorSet",
    "create_vendor",
    "create_vendor_set",
    "create_vendors",
]
