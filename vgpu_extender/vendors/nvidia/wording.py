"""The words HAMi's users read for NVIDIA GPUs: the reasons' texts and units.

These are the texts the extender has always answered kube-scheduler with (metric labels
and Events group by them), byte for byte.
"""

from __future__ import annotations

from vgpu_extender.domain import NEUTRAL_WORDING, Reason, Wording

NVIDIA_WORDING = Wording(
    texts={
        **NEUTRAL_WORDING.texts,
        Reason.TYPE_MISMATCH: "gpu type mismatch",
        Reason.UUID_MISMATCH: "gpu uuid mismatch",
        Reason.NOT_ENOUGH_DEVICES: "not enough gpus",
        Reason.SLOTS: "insufficient gpu slots",
        Reason.EXCLUSIVE: "exclusive gpu conflict",
        Reason.MEMORY: "insufficient gpumem",
        Reason.CORES: "insufficient gpucores",
        Reason.NO_COMPUTE: "no compute left on any GPU",
    },
    # Cores are a percentage of a GPU; never a "%" (kube-scheduler's event recorder
    # reads reasons as a format string).
    units={**NEUTRAL_WORDING.units, Reason.CORES: " percent"},
)
