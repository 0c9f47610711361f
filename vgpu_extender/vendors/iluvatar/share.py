"""How HAMi shares one Iluvatar GPU: its generic per-device Fit (slots, memory, cores,
a 100-core share alone, no share of no cores on a full GPU), per chip, with no
topology rule."""

from __future__ import annotations

from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.hami_share import generic_share
from vgpu_extender.vendors.iluvatar.config import IluvatarChip


def iluvatar_share(chip: IluvatarChip) -> ShareModel:
    return generic_share(chip.common_word, noun="gpu")
