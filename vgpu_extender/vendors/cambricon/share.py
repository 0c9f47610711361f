"""How HAMi shares one MLU: its generic per-device Fit (slots, memory, cores, a
100-core share alone, no share of no cores on a full MLU), with no topology rule."""

from __future__ import annotations

from vgpu_extender.vendors.cambricon.config import WORD
from vgpu_extender.vendors.hami_share import generic_share

CAMBRICON_SHARE = generic_share(WORD, noun="mlu")
