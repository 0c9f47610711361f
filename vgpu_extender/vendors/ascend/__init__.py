"""Huawei Ascend NPUs with HAMi's resource names and annotations: one vendor per chip
(its CommonWord), as HAMi registers them."""

from vgpu_extender.vendors.ascend.chips import DEFAULT_CHIPS, ChipConfig, Template
from vgpu_extender.vendors.ascend.config import AscendConfig
from vgpu_extender.vendors.ascend.vendor import AscendChipVendor, ascend_vendors

__all__ = [
    "DEFAULT_CHIPS",
    "AscendChipVendor",
    "AscendConfig",
    "ChipConfig",
    "Template",
    "ascend_vendors",
]
