"""The binding cycle's ports: what a bind needs from the store and from the cluster.

The binding service (``services.binding``) runs kube-scheduler's binding cycle in
named steps (reserve in the index, commit to the store, publish to the cluster,
unreserve on failure) and reaches the outside only through these two protocols:

- ``BindStore``: one round of reservations on one node in one transaction, the
  reservation of a pod deleted again, the node learnt afresh from the store, and a
  pod's rows marked bound once its Binding exists. The adapter over SQLAlchemy is
  ``services.bind_store.SqlBindStore``.
- ``BindPublisher``: where the pod comes from and where its binding goes. Over the
  Kubernetes API, ``services.bind_publisher.KubePublisher``; without one (standalone)
  ``StandalonePublisher``, which publishes nothing: the committed rows are the bind.

In-memory fakes of both live in ``tests/support/bind_fakes.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from vgpu_extender.domain import PodRequest
from vgpu_extender.kube import EventType, KubeObject
from vgpu_extender.store import Reservation, StoreError


@dataclass(frozen=True, slots=True)
class BindRequest:
    """kube-scheduler's ExtenderBindingArgs."""

    pod_name: str
    namespace: str
    uid: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    def problem(self) -> str:
        """What is wrong with the arguments, naming the field; empty when fine."""
        for field_name, value in (
            ("PodName", self.pod_name),
            ("PodNamespace", self.namespace),
            ("PodUID", self.uid),
            ("Node", self.node),
        ):
            if not isinstance(value, str) or not value.strip():
                return f"bind: field {field_name} must be a non-empty string, got {value!r}"
        return ""


class BindError(Exception):
    """A bind that cannot go ahead; the message is what kube-scheduler sees."""


class BindStore(Protocol):
    """The store, as much of it as a bind writes."""

    def commit(
        self, reservations: Sequence[Reservation], *, bound: bool
    ) -> list[StoreError | None]:
        """Reserve a round of assignments, all on one node, in one transaction; per
        reservation its refusal (``StoreConflict``, ``AlreadyAllocated``,
        ``StoreInputError``), or None when its rows are written (as bound at once when
        ``bound``). Each is re-checked against what is committed and the ones before it:
        the store never over-commits a device. A connection lost before the commit runs
        it again; lost during the commit, the rows are read back rather than written
        twice. Raises ``StoreError`` when the round's outcome is not known (or the store
        failed): nothing is to be taken as written."""
        ...

    def delete_reservation(self, pod_uid: str) -> None:
        """Delete the pod's reserved rows, in a transaction of its own. Raises ``StoreError``."""
        ...

    def learn_node(self, node: str) -> None:
        """Bring the index's view of ``node`` (inventory and pods) up to the store's, after
        another replica changed it."""
        ...

    def mark_bound(self, pod_uid: str) -> None:
        """Record, soon and off the request path, that the pod's Binding exists. Never raises."""
        ...


class BindPublisher(Protocol):
    """The cluster a bind is published to, and the one place the two modes differ."""

    @property
    def claims_on_arrival(self) -> bool:
        """Whether a pod filter has seen may have its devices chosen the moment its bind
        arrives, before any I/O (without Kubernetes, a bind first checks what the store
        holds for the pod and writes its node)."""
        ...

    @property
    def bound_at_commit(self) -> bool:
        """Whether the committed rows are the whole bind, written bound in the commit's
        transaction (nothing to wait for, so no reservation is an earlier attempt's)."""
        ...

    def pod_request(self, args: BindRequest, cached: PodRequest | None) -> PodRequest:
        """The pod's request: ``cached`` (seen at filter), or the pod read and checked.
        Raises ``BindError`` with the text kube-scheduler sees."""
        ...

    def prepare(self, args: BindRequest) -> None:
        """What must be in place before a managed pod's rows are committed (standalone:
        the node's row). Raises ``BindError``."""
        ...

    def post_binding(self, args: BindRequest, annotations: Mapping[str, str] | None) -> None:
        """Bind the pod to ``args.node``, the annotations riding on the Binding (None: a
        pod without managed devices). Raises ``AlreadyBound``, ``OutcomeUnknown`` (it may
        have been applied: read the pod back) and ``KubeError``."""
        ...

    def read_pod(self, args: BindRequest) -> KubeObject | None:
        """The pod as the cluster has it now (None: gone). Raises ``KubeError``."""
        ...

    def annotate(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        """Write ``annotations`` on the pod. Raises ``KubeError``."""
        ...


class BindEvents(Protocol):
    """Where a bind's Events go (``EventRecorder``: queued, posted by a worker)."""

    def record(
        self,
        *,
        namespace: str,
        pod: str,
        uid: str,
        reason: str,
        message: str,
        type: EventType = "Normal",
    ) -> None: ...
