"""The words MetaX users read: HAMi's reason constants, ``gpus`` for the rest."""

from vgpu_extender.vendors.hami_wording import hami_wording

METAX_WORDING = hami_wording("gpus")
