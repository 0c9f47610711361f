"""Hygon DCUs with HAMi's resource names and annotations (``pkg/device/hygon``)."""

from vgpu_extender.vendors.hygon.config import HygonConfig
from vgpu_extender.vendors.hygon.vendor import HygonVendor, hygon_vendors

__all__ = ["HygonConfig", "HygonVendor", "hygon_vendors"]
