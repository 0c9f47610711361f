"""Kunlunxin XPUs with HAMi's two backends (``pkg/device/kunlun``): whole P800 XPUs
(``kunlun``) and vXPUs (``XPU``), each its own vendor word."""

from vgpu_extender.vendors.kunlun.config import KunlunConfig
from vgpu_extender.vendors.kunlun.vendor import KunlunVendor, VxpuVendor, kunlun_vendors

__all__ = ["KunlunConfig", "KunlunVendor", "VxpuVendor", "kunlun_vendors"]
