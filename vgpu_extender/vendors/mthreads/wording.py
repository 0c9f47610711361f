"""The words Moore Threads users read for the reasons a node rejects a pod: HAMi's
reason constants, and ``moore threads gpus`` where HAMi has none."""

from __future__ import annotations

from vgpu_extender.vendors.hami_wording import hami_wording

MTHREADS_WORDING = hami_wording("moore threads gpus")
