"""Accelerator vendors as named plug-ins: request parsing and annotation codecs."""

from vgpu_extender.vendors.base import AdmissionNames, Vendor
from vgpu_extender.vendors.registry import VENDORS, VendorFactory, create_vendor

__all__ = ["VENDORS", "AdmissionNames", "Vendor", "VendorFactory", "create_vendor"]
