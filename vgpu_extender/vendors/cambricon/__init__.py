"""Cambricon MLUs with HAMi's resource names and annotations (``pkg/device/cambricon``)."""

from vgpu_extender.vendors.cambricon.config import CambriconConfig
from vgpu_extender.vendors.cambricon.vendor import CambriconVendor, cambricon_vendors

__all__ = ["CambriconConfig", "CambriconVendor", "cambricon_vendors"]
