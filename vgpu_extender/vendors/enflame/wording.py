"""The words Enflame users read: HAMi's reason constants, ``gcus`` for the rest."""

from vgpu_extender.vendors.hami_wording import hami_wording

ENFLAME_WORDING = hami_wording("gcus")
