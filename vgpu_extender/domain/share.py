"""How a vendor shares one device, as data: the stages one share must pass.

A device offers capacity in three dimensions (allocation slots, memory, compute units);
a share of it asks for some of each (``ShareDemand``). The vendor's ``ShareModel``
lists, in order, the stages a share must pass on a device, each with the neutral reason
that names its failure. Every place that decides whether a share fits evaluates that one
table: the vectorised fit over the whole device grid, the explanation of rejected nodes,
the exact device choice, the plain reference, the store's re-check at bind and the
fragmentation policy.

Two of a vendor's rules reach past one share, and are declared as data too: whether the
pod's mutex policy binds its devices (``honours_mutex``: one more stage, in force for a
demand that asks it), and whether a pod's containers go on one device
(``one_device_per_pod``: the device choice and the reference apply it).

A stage's test is written once and serves both the grid and a single device: it only
compares and does arithmetic on the ``Capacity`` values it is given, which are NumPy
arrays (one cell per device) or plain ints (one device), and returns a mask of the same
shape or a bool.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol, cast

from vgpu_extender.domain.assignment import DeviceUsage
from vgpu_extender.domain.device import Device
from vgpu_extender.domain.reasons import Reason
from vgpu_extender.domain.request import ContainerRequest, PodRequest


class Capacity(NamedTuple):
    """Free or total capacity of a device (ints) or of every device of a grid (int arrays)."""

    slots: Any
    memory: Any
    cores: Any


class CapacityView(Protocol):
    """What a stage test reads of a capacity: a ``Capacity``, or a view of one device's
    that the exact choice moves from device to device."""

    @property
    def slots(self) -> Any: ...

    @property
    def memory(self) -> Any: ...

    @property
    def cores(self) -> Any: ...


class ShareDemand(Protocol):
    """What one share asks of one device: ``slots`` allocations, memory (MiB, or when
    that is 0 a percentage of the device's memory), compute units."""

    @property
    def slots(self) -> int: ...

    @property
    def memory_mib(self) -> int: ...

    @property
    def memory_percent(self) -> int: ...

    @property
    def cores(self) -> int: ...

    @property
    def exclusive(self) -> bool:
        """Whether the share asks for the device alone."""
        ...

    @property
    def mutex(self) -> bool:
        """Whether the pod asks for devices no one else uses (HAMi's mutex policy)."""
        ...

    def memory_on(self, device_memory_mib: Any) -> Any:
        """MiB it takes on a device (or each device of a grid) with that much memory."""
        ...


#: A vendor's rule for which devices of a node one container takes together:
#: ``(fitting, count)``, where ``fitting`` are the devices one share fits on, in the
#: device policy's order, to the positions in ``fitting`` to take, or None when no
#: combination of them is acceptable (``Reason.COMBINATION``).
PickRule = Callable[[Sequence[Device], int], "tuple[int, ...] | None"]
#: A stage's test: ``(free, total, demand)`` to a bool, or a mask over the grid.
StageTest = Callable[[CapacityView, CapacityView, ShareDemand], Any]
#: The store's words for a stage failed at bind: ``(where, used, total, demand)``, where
#: ``used`` is what is committed on the device, this share included.
MisfitText = Callable[[str, Capacity, Capacity, ShareDemand], str]


def _always(demand: ShareDemand) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Stage:
    """One rule a share must pass on a device.

    ``applies`` says whether the stage is in force for a demand (an exclusivity stage
    only for exclusive shares). ``measure`` names the dimension whose numbers explain a
    failure (``need`` and ``best free``); None explains it by counting devices.
    ``when_empty``: whether the check "would the share fit with every allocation on the
    node released" (a failure preemption cannot help) evaluates the stage; a stage about
    what others hold (slots in use, exclusivity, compute left) leaves it out.
    """

    reason: Reason
    test: StageTest
    misfit: MisfitText
    applies: Callable[[ShareDemand], bool] = _always
    measure: str | None = None
    when_empty: bool = True


def _unused(free: CapacityView, total: CapacityView, demand: ShareDemand) -> object:
    # HAMi: isMutex && Used > 0 is a conflict.
    return free.slots == total.slots


def _mutex_text(where: str, used: Capacity, total: Capacity, demand: ShareDemand) -> str:
    return (
        f"{where} is in use by {used.slots - demand.slots} allocation(s); "
        "the pod's mutex policy needs an unused device"
    )


#: HAMi's ``mutex`` device policy, for a vendor that honours it: a device in use is not
#: shared. It follows the slots stage, as in HAMi's Fit.
MUTEX_STAGE = Stage(Reason.EXCLUSIVE, _unused, _mutex_text, when_empty=False)


def _with_mutex(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """``stages`` with the mutex stage after the slots stage (first without one)."""
    at = next((i + 1 for i, stage in enumerate(stages) if stage.reason is Reason.SLOTS), 0)
    return (*stages[:at], MUTEX_STAGE, *stages[at:])


def one_device_allows(earlier: Collection[str], candidate: str) -> bool:
    """HAMi's ``customFilterRule`` of a vendor that puts a pod on one device: the
    device ``candidate`` may be given when every device the pod's earlier containers
    hold (``earlier``, UUIDs) is that one."""
    return all(uuid == candidate for uuid in earlier)


@dataclass(frozen=True, slots=True)
class ShareModel:
    """A vendor's devices as the engine sees them: the ordered stages of one share, and
    what a share takes from a device."""

    name: str
    stages: tuple[Stage, ...]
    #: What one share takes from a device of that total: ``(total, demand) -> Capacity``.
    consumed: Callable[[Capacity, ShareDemand], Capacity]
    #: A share already given, from a pod's footprint on a device: what the store
    #: re-checks at bind and on import.
    held: Callable[[DeviceUsage], ShareDemand]
    #: What a device is called in the reasons' details ("2 gpus on one numa node").
    noun: str = "device"
    #: Which fitting devices a container of several takes (topology); None: the first
    #: ``count`` in the device policy's order.
    pick: PickRule | None = None
    #: Whether ``pick`` may refuse a node where enough devices fit one by one (910C's
    #: whole modules): only then is each node the grid passes confirmed by the exact
    #: choice. A rule that only prefers some devices (a ring) leaves counting exact.
    pick_refuses: bool = True
    #: The custom-info key whose (integer) value puts devices in one group, a link
    #: domain such as Ascend's HCCS ring (``NetworkID``). A container of several is
    #: then also scored by the share of its devices one group can hold, times
    #: ``group_weight`` (HAMi's topology bonus, added to the node score).
    group_key: str | None = None
    group_weight: float = 10.0
    #: Memory is handed out in pieces of at least ``memory_quantum`` MiB and at most
    #: ``memory_piece`` MiB (0: the device's memory), as Ascend's vNPU templates are: the
    #: fragmentation policy counts a device's free memory only as far as such pieces can
    #: still be carved from it with its free slots (all of it when the device is empty).
    memory_quantum: int = 1
    memory_piece: int = 0
    #: Whether a pod's mutex policy binds the vendor's devices (``MUTEX_STAGE``); a
    #: vendor whose devices are only ever given whole and alone need not say so.
    honours_mutex: bool = False
    #: Whether every container of a pod goes on one device (Moore Threads: "only one
    #: mthreads device can be shared in a pod", ``one_device_allows``); the device
    #: choice and the reference apply it, a pod of several containers being confirmed
    #: by the exact choice anyway.
    one_device_per_pod: bool = False
    #: ``stages`` with the mutex stage where the vendor honours it, made once.
    mutex_stages: tuple[Stage, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        chosen = _with_mutex(self.stages) if self.honours_mutex else self.stages
        object.__setattr__(self, "mutex_stages", chosen)

    def stages_for(self, demand: ShareDemand) -> tuple[Stage, ...]:
        """The stages in force for ``demand``, in order."""
        stages = self.mutex_stages if demand.mutex else self.stages
        return tuple(stage for stage in stages if stage.applies(demand))


@dataclass(frozen=True, slots=True)
class HeldShare:
    """A share already given (a pod's footprint on one device, memory in MiB), as a
    demand; the vendor's ``ShareModel.held`` says whether it is exclusive."""

    slots: int
    memory_mib: int
    cores: int
    exclusive: bool
    memory_percent: int = 0
    #: The store re-checks what a device holds, not how the pod asked for it.
    mutex: bool = False

    def memory_on(self, device_memory_mib: Any) -> Any:
        return self.memory_mib


def as_mutex(held: ShareDemand) -> ShareDemand:
    """``held`` as a pod with the mutex policy holds it: the store re-checks a mutex
    pod's devices with the mutex stage, as the engine chose them. Every vendor's held
    share is a dataclass with a ``mutex`` field (the vendor contract checks it)."""
    changed: ShareDemand = replace(cast(Any, held), mutex=True)
    return changed


@dataclass(frozen=True, slots=True)
class ShareModels:
    """The share model of each vendor a process serves, by vendor word (a device's
    ``vendor``): what the engine and the store evaluate for a device or an ask.

    ``default`` answers for a word with no model of its own (an ask with no vendor word,
    a device registered by a vendor the process does not serve).
    """

    default: ShareModel
    by_vendor: tuple[tuple[str, ShareModel], ...] = ()
    #: Whether any model spans a pod's containers (``one_device_per_pod``): the device
    #: choice looks for such rules only then.
    spans_containers: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        models = (self.default, *(model for _, model in self.by_vendor))
        spans = any(model.one_device_per_pod for model in models)
        object.__setattr__(self, "spans_containers", spans)

    def one_device_groups(
        self, request: PodRequest
    ) -> dict[tuple[bool, str], list[ContainerRequest]]:
        """Per (init, vendor word) of a vendor that puts a pod on one device
        (``one_device_per_pod``), the pod's asks of it in container order, where there
        are several: the group's first container takes only a device that holds them all
        (``holds_together``); a lone ask needs no look ahead."""
        groups: dict[tuple[bool, str], list[ContainerRequest]] = {}
        for container in request.containers:
            for ask in container.asks:
                if ask.wants_devices and self.of(ask.vendor).one_device_per_pod:
                    groups.setdefault((container.init, ask.vendor), []).append(ask)
        return {key: asks for key, asks in groups.items() if len(asks) > 1}

    def of(self, vendor: str) -> ShareModel:
        """The share model for devices (or an ask) of ``vendor``."""
        for word, model in self.by_vendor:
            if word == vendor:
                return model
        return self.default

    @classmethod
    def one(cls, model: ShareModel) -> ShareModels:
        return cls(default=model)
