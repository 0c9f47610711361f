"""MetaX GPUs with HAMi's two backends (``pkg/device/metax``): whole cards
(``Metax-GPU``) and shared sGPUs (``Metax-SGPU``), each its own vendor word."""

from vgpu_extender.vendors.metax.config import MetaxConfig
from vgpu_extender.vendors.metax.vendor import MetaxGpuVendor, MetaxSgpuVendor, metax_vendors

__all__ = ["MetaxConfig", "MetaxGpuVendor", "MetaxSgpuVendor", "metax_vendors"]
