"""The words Hygon users read for the reasons a node rejects a pod: HAMi's reason
constants, and ``dcus`` where HAMi has none."""

from __future__ import annotations

from vgpu_extender.vendors.hami_wording import hami_wording

HYGON_WORDING = hami_wording("dcus")
