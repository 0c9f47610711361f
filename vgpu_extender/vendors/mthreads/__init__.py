"""Moore Threads GPUs with HAMi's resource names and annotations (``pkg/device/mthreads``)."""

from vgpu_extender.vendors.mthreads.config import MthreadsConfig
from vgpu_extender.vendors.mthreads.vendor import MthreadsVendor, mthreads_vendors

__all__ = ["MthreadsConfig", "MthreadsVendor", "mthreads_vendors"]
