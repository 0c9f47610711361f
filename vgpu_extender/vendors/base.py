"""The seam between the vendor-neutral engine and one accelerator vendor's conventions.

A vendor knows its resource names, how to read a pod's request, and how its node and pod
annotations are spelled. It knows nothing of placement, policies or I/O: those belong to
the engine and the services, which speak only the domain types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, PodRequest, Wording
from vgpu_extender.domain.share import ShareModel


@dataclass(frozen=True, slots=True)
class AdmissionNames:
    """What the admission webhook writes for a vendor's pods, as HAMi's webhook does:
    which resource plays which role (None: the vendor has none), the compute value of a
    share that asks for its devices whole, and where a container's priority goes."""

    count: str | None = None
    memory: str | None = None
    memory_percent: str | None = None
    cores: str | None = None
    priority: str | None = None
    #: The cores value written for a container that gives a bare count (its devices whole).
    exclusive_cores: str = "100"
    #: The environment variable a container's priority is given in.
    priority_env: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerAdmission:
    """What a vendor's admission (HAMi's ``MutateAdmission``) changes in one container:
    the limits and requests to set (added or replaced), environment variables to add
    (one already there by name is kept), the pod's ``runtimeClassName`` to set when
    the pod has none ("" sets nothing), and pod annotations to add (one the pod already
    has is kept; of two containers naming one key, the later wins, as HAMi's webhook
    walks them); ``pod_annotations_set`` are written whatever the pod has (HAMi sets
    them: a device plugin reads them). ``uses``: whether the container asks for this
    vendor (HAMi's ``found``)."""

    limits: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)
    env: tuple[tuple[str, str], ...] = ()
    runtime_class_name: str = ""
    uses: bool = False
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    pod_annotations_set: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What a vendor may read of a Node object to make its inventory: the node's name
    (HAMi builds some vendors' device IDs from it), its labels (AWS Neuron's instance
    type), its annotations and its ``status.capacity`` (empty when not read). Any
    change of a label or of a key in ``node_keys``/``capacity_keys`` is a new
    inventory, so a vendor reading these needs no keys of its own for labels."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a node's name must be a non-empty string, not {self.name!r}")


@dataclass(frozen=True, slots=True)
class HandshakeVerdict:
    """A node's answer to a vendor's handshake (HAMi's ``CheckHealth``): whether the
    vendor's devices there are usable, the handshake value to write (None: nothing),
    when the verdict may change with no annotation changed (None: only on a change),
    and why the devices are not usable."""

    healthy: bool
    write: str | None = None
    recheck_at: datetime | None = None
    why: str = ""


class NodeHandshake(Protocol):
    """A vendor whose node agent answers the scheduler through a node annotation
    (HAMi's ``hami.io/node-handshake-<CW>``)."""

    @property
    def annotation(self) -> str:
        """The node annotation the handshake is written in."""
        ...

    @property
    def resource(self) -> str:
        """The extended resource whose node allocatable keeps a silent node usable."""
        ...

    def check(
        self, annotations: Mapping[str, str], now: datetime, allocatable: Callable[[], int]
    ) -> HandshakeVerdict | None:
        """The verdict on a node of these ``annotations`` at ``now`` (aware, UTC);
        ``allocatable`` reads the node's allocatable ``resource`` (asked only when
        needed: it may cost a read of the node). None: the node carries nothing of the
        vendor."""
        ...


class Vendor(Protocol):
    """One accelerator vendor's wire conventions (HAMi-compatible for NVIDIA)."""

    @property
    def name(self) -> str:
        """The vendor word, e.g. ``NVIDIA``: HAMi's ``CommonWord()``."""
        ...

    @property
    def share(self) -> ShareModel:
        """How the vendor's devices are shared: the stages a share must pass."""
        ...

    @property
    def wording(self) -> Wording:
        """The words of the reasons a node rejects a pod for, as the vendor's users read
        them (the HTTP answers, Events and metric labels)."""
        ...

    @property
    def admission(self) -> AdmissionNames:
        """The resource names and defaults the admission webhook applies."""
        ...

    @property
    def resource_names(self) -> frozenset[str]:
        """The extended resources this vendor manages (the extender's managedResources)."""
        ...

    @property
    def inventory_annotation(self) -> str:
        """The node annotation carrying the device inventory."""
        ...

    @property
    def node_keys(self) -> tuple[str, ...]:
        """Every node annotation ``decode_node`` reads (a change of any is a new inventory)."""
        ...

    @property
    def capacity_keys(self) -> tuple[str, ...]:
        """The node's ``status.capacity`` entries ``decode_capacity`` reads; empty for a
        vendor whose inventory is an annotation."""
        ...

    def decode_capacity(self, node: NodeFacts) -> tuple[Device, ...] | None:
        """This vendor's devices from the node's capacity (HAMi reads some vendors' so, with
        ids made from the node's name); None when the node has none of this vendor's
        capacity or the vendor reads an annotation instead. Raises ``InventoryError``."""
        ...

    @property
    def cordon_annotation(self) -> str:
        """The node annotation listing device UUIDs that take no new allocations."""
        ...

    @property
    def node_annotation(self) -> str:
        """The pod annotation naming the node the pod's devices are on."""
        ...

    @property
    def assignment_annotation(self) -> str:
        """The pod annotation from which committed allocations are rebuilt."""
        ...

    @property
    def handshake(self) -> NodeHandshake | None:
        """The node handshake of the vendor's node agent; None: it has none."""
        ...

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRequest:
        """The pod's request; raises ``RequestError`` on bad input."""
        ...

    def share_label(self, device: Device, memory_mib: int) -> str:
        """What the vendor calls a share of ``memory_mib`` on ``device`` (Ascend: its vNPU
        template, such as ``vir05_1c_16g``); empty when it has no name for it."""
        ...

    def admit(
        self, container: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> ContainerAdmission | None:
        """What the admission webhook changes in ``container`` (of ``pod``) beyond the
        defaults of ``admission``; None: nothing. Raises ``RequestError`` whose text is
        the vendor's own refusal (HAMi's, for clients that match it)."""
        ...

    def decode_inventory(self, value: str) -> tuple[Device, ...]:
        """Devices from the inventory annotation; raises ``InventoryError``."""
        ...

    def encode_inventory(self, devices: Iterable[Device]) -> str:
        """The inventory annotation value, exactly as the vendor's node agent writes it."""
        ...

    def decode_node(self, node: NodeFacts) -> tuple[Device, ...] | None:
        """This vendor's devices on a node, from the node's annotations (and, where HAMi
        reads them so, its name and labels); None when the node carries no inventory of
        this vendor. Raises ``InventoryError`` on a bad one."""
        ...

    def decode_cordon(self, value: str) -> frozenset[str]:
        """Cordoned device UUIDs from the cordon annotation."""
        ...

    def encode_assignment(self, assignment: PodAssignment) -> str:
        """The pod's device annotation value; raises ``AnnotationError``."""
        ...

    def decode_assignment(
        self, value: str, *, init: tuple[bool, ...] = ()
    ) -> tuple[tuple[DeviceGrant, ...], ...]:
        """Grants per container from the device annotation; raises ``AnnotationError``.

        With ``init`` (one flag per container of the pod) the annotation must have
        exactly that many container segments.
        """
        ...

    def bind_annotations(
        self, assignment: PodAssignment, *, bind_time: int, request: PodRequest | None = None
    ) -> dict[str, str]:
        """The annotations the pod gets at bind (carried by the Binding), for the node agent;
        ``request`` is the pod's, for a vendor whose annotations depend on what it asked
        (Ascend's sharing mode)."""
        ...
