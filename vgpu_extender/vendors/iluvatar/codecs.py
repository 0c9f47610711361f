"""One Iluvatar chip's node and pod keys: the inventory ``hami.io/node-<CW>-register``
in HAMi's legacy text, the handshake ``hami.io/node-handshake-<CW>`` (its clean-up is a
no-op in HAMi), and HAMi's device encoding under ``hami.io/<CW>-devices-to-allocate``
(consumed by the vendor's gpu-manager) and ``hami.io/<CW>-devices-allocated``. The bind
takes HAMi's shared node lock."""

from __future__ import annotations

from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK
from vgpu_extender.vendors.iluvatar.config import IluvatarChip

NODE_LOCK = MUTEX_LOCK


def register_annotation(chip: IluvatarChip) -> str:
    return f"hami.io/node-{chip.common_word}-register"


def handshake_annotation(chip: IluvatarChip) -> str:
    return f"hami.io/node-handshake-{chip.common_word}"


def to_allocate_annotation(chip: IluvatarChip) -> str:
    return f"hami.io/{chip.common_word}-devices-to-allocate"


def allocated_annotation(chip: IluvatarChip) -> str:
    return f"hami.io/{chip.common_word}-devices-allocated"
