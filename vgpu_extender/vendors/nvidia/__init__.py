"""NVIDIA GPUs with HAMi's resource names and annotations (HAMi's device plugin and
HAMi-core keep working against what this vendor writes)."""

from vgpu_extender.vendors.nvidia.config import NvidiaConfig
from vgpu_extender.vendors.nvidia.vendor import NvidiaVendor

__all__ = ["NvidiaConfig", "NvidiaVendor"]
