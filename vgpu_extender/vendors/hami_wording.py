"""Words for the reasons a node rejects a pod, as a HAMi vendor's users read them:
HAMi's reason constants (``pkg/device/common``), so a message reads as HAMi's
``"1/1 CardInsufficientMemory"`` does (with numbers after it), and the vendor's device
noun for the reasons HAMi has no constant for. No text is a prefix of another (a message
is classified by the text it starts with) and none holds a ``%``."""

from __future__ import annotations

from vgpu_extender.domain import NEUTRAL_WORDING, Reason, Wording


def hami_wording(devices: str) -> Wording:
    """The words of a vendor whose devices are called ``devices`` (plural, e.g. ``mlus``)."""
    return Wording(
        texts={
            **NEUTRAL_WORDING.texts,
            Reason.NO_DEVICES: f"no {devices}",
            Reason.TYPE_MISMATCH: "CardTypeMismatch",
            Reason.UUID_MISMATCH: "CardUuidMismatch",
            Reason.UNHEALTHY: "CardNotHealth",
            Reason.CORDONED: f"cordoned {devices}",
            Reason.CONFLICTED: f"conflicted {devices}",
            Reason.NOT_ENOUGH_DEVICES: "NodeInsufficientDevice",
            Reason.NUMA: "NumaNotFit",
            Reason.SLOTS: "CardTimeSlicingExhausted",
            Reason.EXCLUSIVE: "ExclusiveDeviceAllocateConflict",
            Reason.MEMORY: "CardInsufficientMemory",
            Reason.CORES: "CardInsufficientCore",
            Reason.NO_COMPUTE: "CardComputeUnitsExhausted",
            Reason.MODE_MISMATCH: "ModeNotFit",
            Reason.COMBINATION: "AllocatedCardsInsufficientRequest",
            Reason.SAME_DEVICE: "CardNotFoundCustomFilterRule",
        },
        units=dict(NEUTRAL_WORDING.units),
    )
