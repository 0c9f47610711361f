"""AMD GPUs with HAMi's resource names and annotations (``pkg/device/amd``)."""

from vgpu_extender.vendors.amd.config import AmdConfig
from vgpu_extender.vendors.amd.vendor import AmdVendor, amd_vendors

__all__ = ["AmdConfig", "AmdVendor", "amd_vendors"]
