"""The words Ascend users read for the reasons a node rejects a pod: NPU words over the
neutral ones. No text is a prefix of another (``reason_of`` classifies a message by the
text it starts with) and none holds a ``%``."""

from __future__ import annotations

from vgpu_extender.domain import NEUTRAL_WORDING, Reason, Wording

ASCEND_WORDING = Wording(
    texts={
        **NEUTRAL_WORDING.texts,
        Reason.NO_DEVICES: "no npus",
        Reason.TYPE_MISMATCH: "npu type mismatch",
        Reason.UUID_MISMATCH: "npu uuid mismatch",
        Reason.UNHEALTHY: "unhealthy npus",
        Reason.CORDONED: "cordoned npus",
        Reason.CONFLICTED: "conflicted npus",
        Reason.NOT_ENOUGH_DEVICES: "not enough npus",
        Reason.SLOTS: "insufficient npu slots",
        Reason.EXCLUSIVE: "exclusive npu conflict",
        Reason.MEMORY: "insufficient npu memory",
        Reason.CORES: "insufficient npu cores",
        Reason.NO_COMPUTE: "no compute left on any npu",
        Reason.MODE_MISMATCH: "npu mode mismatch",
        Reason.COMBINATION: "no npu combination fits",
    },
    units=dict(NEUTRAL_WORDING.units),
)
