"""The words Cambricon users read for the reasons a node rejects a pod: HAMi's reason
constants, and ``mlus`` where HAMi has none."""

from __future__ import annotations

from vgpu_extender.vendors.hami_wording import hami_wording

CAMBRICON_WORDING = hami_wording("mlus")
