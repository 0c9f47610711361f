"""How HAMi shares Enflame GCUs, in its Fit order.

- ``GCU``: a whole card, alone (HAMi rejects a card with ``Used > 0``): slots,
  exclusivity, memory, cores.
- ``Enflame`` (DRS): a profile's memory and core percent on a GCU of ``count`` slices:
  slots, memory, cores; no exclusivity stage (a full-size profile is bound by memory).

HAMi counts a DRS GCU's ``Used`` in slices (a ``3g`` profile takes 3) and refuses it
once every slice is used; the index counts one slot per share. The verdicts agree: the
profiles' core percents (``ceil(size * 100 / max_slice)``) of shares filling every slice
add up to 100 or more, so the cores stage refuses the GCU then, with
``CardInsufficientCore`` where HAMi names ``CardTimeSlicingExhausted``.
"""

from __future__ import annotations

from dataclasses import replace

from vgpu_extender.domain import Reason
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.enflame.request import DRS_WORD, GCU_WORD
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

_WHOLE = (Reason.SLOTS, Reason.EXCLUSIVE, Reason.MEMORY, Reason.CORES)
_DRS = (Reason.SLOTS, Reason.MEMORY, Reason.CORES)

GCU_SHARE: ShareModel = replace(
    NVIDIA_SHARE,
    name=GCU_WORD,
    stages=tuple(s for s in NVIDIA_SHARE.stages if s.reason in _WHOLE),
    noun="gcu",
    # Already alone on its GCU: HAMi's whole-GCU Fit reads no mutex policy.
    honours_mutex=False,
)
DRS_SHARE: ShareModel = replace(
    NVIDIA_SHARE,
    name=DRS_WORD,
    stages=tuple(s for s in NVIDIA_SHARE.stages if s.reason in _DRS),
    noun="gcu",
    honours_mutex=True,
)
