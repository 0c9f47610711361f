"""How HAMi shares one DCU: its generic per-device Fit (slots, memory, cores, a
100-core share alone, no share of no cores on a full DCU), with no topology rule."""

from __future__ import annotations

from vgpu_extender.vendors.hami_share import generic_share
from vgpu_extender.vendors.hygon.config import WORD

HYGON_SHARE = generic_share(WORD, noun="dcu")
