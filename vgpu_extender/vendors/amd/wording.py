"""The words AMD users read: HAMi's reason constants, ``gpus`` for the rest."""

from vgpu_extender.vendors.hami_wording import hami_wording

AMD_WORDING = hami_wording("gpus")
