"""The words Ascend users read for the reasons a node rejects a pod: HAMi's reason
constants (``pkg/device/common``) where HAMi has one, so a message reads as HAMi's
``"1/1 CardInsufficientMemory"`` does (with numbers after it), and NPU words for the
rest. No text is a prefix of another (``reason_of`` classifies a message by the text it
starts with) and none holds a ``%``."""

from __future__ import annotations

from vgpu_extender.domain import NEUTRAL_WORDING, Reason, Wording

ASCEND_WORDING = Wording(
    texts={
        **NEUTRAL_WORDING.texts,
        Reason.NO_DEVICES: "no npus",
        Reason.TYPE_MISMATCH: "CardTypeMismatch",
        Reason.UUID_MISMATCH: "CardUuidMismatch",
        Reason.UNHEALTHY: "CardNotHealth",
        Reason.CORDONED: "cordoned npus",
        Reason.CONFLICTED: "conflicted npus",
        Reason.NOT_ENOUGH_DEVICES: "NodeInsufficientDevice",
        Reason.NUMA: "NumaNotFit",
        Reason.SLOTS: "CardTimeSlicingExhausted",
        Reason.EXCLUSIVE: "ExclusiveDeviceAllocateConflict",
        Reason.MEMORY: "CardInsufficientMemory",
        Reason.CORES: "CardInsufficientCore",
        Reason.NO_COMPUTE: "CardComputeUnitsExhausted",
        Reason.MODE_MISMATCH: "ModeNotFit",
        Reason.COMBINATION: "AllocatedCardsInsufficientRequest",
    },
    units=dict(NEUTRAL_WORDING.units),
)
