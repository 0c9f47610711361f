"""The words Ascend users read for the reasons a node rejects a pod: HAMi's reason
constants (``pkg/device/common``) where HAMi has one, so a message reads as HAMi's
``"1/1 CardInsufficientMemory"`` does (with numbers after it), and NPU words for the
rest. No text is a prefix of another (``reason_of`` classifies a message by the text it
starts with) and none holds a ``%``."""

from __future__ import annotations

from vgpu_extender.vendors.hami_wording import hami_wording

ASCEND_WORDING = hami_wording("npus")
