"""The words Iluvatar users read for the reasons a node rejects a pod: HAMi's reason
constants, and ``gpus`` where HAMi has none."""

from __future__ import annotations

from vgpu_extender.vendors.hami_wording import hami_wording

ILUVATAR_WORDING = hami_wording("gpus")
