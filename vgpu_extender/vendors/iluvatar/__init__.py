"""Iluvatar GPUs with HAMi's resource names and annotations (``pkg/device/iluvatar``):
one vendor per chip (its CommonWord), as HAMi registers them."""

from vgpu_extender.vendors.iluvatar.config import DEFAULT_CHIPS, IluvatarChip, IluvatarConfig
from vgpu_extender.vendors.iluvatar.vendor import IluvatarChipVendor, iluvatar_vendors

__all__ = [
    "DEFAULT_CHIPS",
    "IluvatarChip",
    "IluvatarChipVendor",
    "IluvatarConfig",
    "iluvatar_vendors",
]
