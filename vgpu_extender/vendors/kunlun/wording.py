"""The words Kunlunxin users read: HAMi's reason constants, ``xpus`` for the rest."""

from vgpu_extender.vendors.hami_wording import hami_wording

KUNLUN_WORDING = hami_wording("xpus")
