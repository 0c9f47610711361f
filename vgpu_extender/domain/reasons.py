"""Why a node cannot take a pod: a closed vocabulary with numbers, turned into text at the edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from vgpu_extender.domain.text import without_format_verbs


class Reason(StrEnum):
    """Rejection codes, the same for every vendor; the words a user reads come from the
    vendor's ``Wording`` (``Rejection.message``)."""

    UNKNOWN_NODE = "unknown-node"
    INVENTORY = "inventory"
    NO_DEVICES = "no-devices"
    TYPE_MISMATCH = "type-mismatch"
    UUID_MISMATCH = "uuid-mismatch"
    UNHEALTHY = "unhealthy"
    CORDONED = "cordoned"
    #: Devices a running pod's import found over-committed: no new pod until resolved.
    CONFLICTED = "conflicted"
    NOT_ENOUGH_DEVICES = "not-enough-devices"
    NUMA = "numa"
    SLOTS = "slots"
    EXCLUSIVE = "exclusive"
    MEMORY = "memory"
    CORES = "cores"
    #: A container asking for no cores still needs a device with some compute left.
    NO_COMPUTE = "no-compute"
    #: The pod asks for a way of sharing (Ascend's ``hami-core``) the device is not in.
    MODE_MISMATCH = "mode-mismatch"
    #: Enough devices fit one by one, but no set of them meets the vendor's topology rule
    #: (Ascend 910C's whole modules).
    COMBINATION = "combination"
    #: The vendor puts every container of a pod on one device (HAMi's
    #: ``customFilterRule``), and the pod's earlier containers hold another.
    SAME_DEVICE = "same-device"
    CPU = "cpu"
    HOST_MEMORY = "host-memory"
    LABEL = "label"


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
        Reason.MODE_MISMATCH,
        Reason.LABEL,
    }
)

#: Reasons whose numbers are an amount needed and the best free ("best free"); the
#: others count devices ("have").
MEASURED = frozenset({Reason.MEMORY, Reason.CORES, Reason.CPU, Reason.HOST_MEMORY})


@dataclass(frozen=True, slots=True)
class Wording:
    """The words of the reasons, as a vendor says them: each reason's text (the stable
    prefix of the message kube-scheduler shows, and of the metric label) and the unit of
    its numbers."""

    texts: Mapping[Reason, str]
    units: Mapping[Reason, str] = field(default_factory=dict)

    def text(self, reason: Reason) -> str:
        return self.texts[reason]

    def all_texts(self) -> tuple[str, ...]:
        """Every reason's text, longest first (a prefix match finds the most specific)."""
        return tuple(sorted(self.texts.values(), key=len, reverse=True))


#: The words for any device: what a vendor says where it has no words of its own.
NEUTRAL_WORDING = Wording(
    texts={
        Reason.UNKNOWN_NODE: "node unregistered",
        Reason.INVENTORY: "no usable device inventory",
        Reason.NO_DEVICES: "no devices",
        Reason.TYPE_MISMATCH: "device type mismatch",
        Reason.UUID_MISMATCH: "device uuid mismatch",
        Reason.UNHEALTHY: "unhealthy devices",
        Reason.CORDONED: "cordoned devices",
        Reason.CONFLICTED: "conflicted devices",
        Reason.NOT_ENOUGH_DEVICES: "not enough devices",
        Reason.NUMA: "numa mismatch",
        Reason.SLOTS: "insufficient device slots",
        Reason.EXCLUSIVE: "exclusive device conflict",
        Reason.MEMORY: "insufficient device memory",
        Reason.CORES: "insufficient compute",
        Reason.NO_COMPUTE: "no compute left on any device",
        Reason.MODE_MISMATCH: "device mode mismatch",
        Reason.COMBINATION: "no device combination fits",
        Reason.SAME_DEVICE: "containers of one pod need one device",
        Reason.CPU: "insufficient cpu",
        Reason.HOST_MEMORY: "insufficient memory",
        Reason.LABEL: "missing priority label",
    },
    # Never a "%": kube-scheduler hands reasons to its event recorder as a format string.
    units={Reason.MEMORY: " MiB", Reason.HOST_MEMORY: " MiB", Reason.CPU: "m"},
)


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

    def message(self, wording: Wording = NEUTRAL_WORDING) -> str:
        """The stable text kube-scheduler receives, in the vendor's ``wording``, e.g.
        ``insufficient gpumem: need 4000 MiB, best free 2048 MiB``. Identical rejections
        give identical strings, so the scheduler's event groups them."""
        text = wording.text(self.reason)
        if self.need is not None and self.have is not None:
            unit = wording.units.get(self.reason, "")
            label = "best free" if self.reason in MEASURED else "have"
            text = f"{text}: need {self.need}{unit}, {label} {self.have}{unit}"
        if self.detail:
            detail = without_format_verbs(self.detail)
            text = f"{text} ({detail})" if ":" in text else f"{text}: {detail}"
        return text
