"""Enflame GCUs with HAMi's two backends (``pkg/device/enflame``): whole cards (``GCU``)
and DRS hard partitions (``Enflame``), each its own vendor word."""

from vgpu_extender.vendors.enflame.config import EnflameConfig
from vgpu_extender.vendors.enflame.profiles import Profile
from vgpu_extender.vendors.enflame.vendor import EnflameDrsVendor, GcuVendor, enflame_vendors

__all__ = ["EnflameConfig", "EnflameDrsVendor", "GcuVendor", "Profile", "enflame_vendors"]
