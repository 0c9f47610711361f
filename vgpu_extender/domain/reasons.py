"""Why a node cannot take a pod: a closed vocabulary with numbers, turned into text at the edge."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vgpu_extender.domain.text import without_format_verbs


class Reason(StrEnum):
    """Rejection codes. The value is the stable prefix of the message kube-scheduler shows."""

    UNKNOWN_NODE = "node unregistered"
    INVENTORY = "no usable device inventory"
    NO_DEVICES = "no devices"
    TYPE_MISMATCH = "gpu type mismatch"
    UUID_MISMATCH = "gpu uuid mismatch"
    UNHEALTHY = "unhealthy devices"
    CORDONED = "cordoned devices"
    #: Devices a running pod's import found over-committed: no new pod until resolved.
    CONFLICTED = "conflicted devices"
    NOT_ENOUGH_DEVICES = "not enough gpus"
    NUMA = "numa mismatch"
    SLOTS = "insufficient gpu slots"
    EXCLUSIVE = "exclusive gpu conflict"
    MEMORY = "insufficient gpumem"
    CORES = "insufficient gpucores"
    #: A container asking for no cores still needs a device with some compute left.
    NO_COMPUTE = "no compute left on any GPU"
    CPU = "insufficient cpu"
    HOST_MEMORY = "insufficient memory"
    LABEL = "missing priority label"


#: Reasons after which no amount of preemption can help.
NEVER_FITS = frozenset(
    {
        Reason.UNKNOWN_NODE,
        Reason.INVENTORY,
        Reason.NO_DEVICES,
        Reason.TYPE_MISMATCH,
        Reason.UUID_MISMATCH,
        Reason.UNHEALTHY,
        Reason.CORDONED,
        Reason.CONFLICTED,
        Reason.NOT_ENOUGH_DEVICES,
        Reason.NUMA,
        Reason.LABEL,
    }
)

_UNITS = {
    Reason.MEMORY: " MiB",
    Reason.HOST_MEMORY: " MiB",
    # Never a "%": kube-scheduler hands reasons to its event recorder as a format string.
    Reason.CORES: " percent",
    Reason.CPU: "m",
}


@dataclass(frozen=True, slots=True)
class Rejection:
    """One node's verdict for one pod.

    ``need`` and ``have`` carry the numbers (for memory: MiB needed per device and
    the best free amount among the devices still in the running). ``unresolvable`` says
    that preempting pods on the node could never help (a type mismatch, too few devices
    at all, a request larger than any device).
    """

    reason: Reason
    need: int | None = None
    have: int | None = None
    unresolvable: bool = False
    detail: str = ""

    def message(self) -> str:
        """The stable text kube-scheduler receives, e.g. ``insufficient gpumem: need 4000
        MiB, best free 2048 MiB``. Identical rejections give identical strings, so the
        scheduler's event groups them."""
        text = self.reason.value
        if self.need is not None and self.have is not None:
            unit = _UNITS.get(self.reason, "")
            label = "best free" if self.reason in _UNITS else "have"
            text = f"{text}: need {self.need}{unit}, {label} {self.have}{unit}"
        if self.detail:
            detail = without_format_verbs(self.detail)
            text = f"{text} ({detail})" if ":" in text else f"{text}: {detail}"
        return text
