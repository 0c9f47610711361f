"""The one seam through which the extender talks to Kubernetes.

Every layer above ``kube`` depends on :class:`KubeClient` only. The real
implementation (:mod:`vgpu_extender.kube.real`) speaks HTTP through the official
client; the fake (:mod:`vgpu_extender.kube.fake`) keeps objects in memory with the
same semantics (resourceVersion preconditions, 409 on double binding, watch history
and expiry), so unit tests exercise the same behaviour without a server.

Objects are plain dicts (:data:`~vgpu_extender.kube.objects.KubeObject`); read them
with :mod:`vgpu_extender.kube.objects`. Errors are those of
:mod:`vgpu_extender.kube.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Literal, NamedTuple, Protocol

from vgpu_extender.kube.objects import KubeObject

EventType = Literal["Normal", "Warning"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED"]
WatchEvent = tuple[WatchEventType, KubeObject]
#: Called after each object of a list as it is decoded: a long background pass's
#: ``Pacer.tick``, so that its bursts and pauses reach into the listing too.
Pace = Callable[[], None]


class Listing(NamedTuple):
    """A list of objects and the resourceVersion to watch from to miss nothing after it."""

    items: list[KubeObject]
    resource_version: str


class KubeClient(Protocol):
    """What the extender needs from the Kubernetes API, and nothing more.

    Methods are synchronous and thread-safe; call them from worker threads, never
    from inside an ``async def`` on the event loop.
    """

    def get_pod(self, namespace: str, name: str) -> KubeObject | None:
        """The pod, or ``None`` when it does not exist."""
        ...

    def list_pods(self, *, node: str | None = None) -> list[KubeObject]:
        """All pods of all namespaces; only those with ``spec.nodeName == node`` if given."""
        ...

    def list_pods_with_version(
        self, *, node: str | None = None, pace: Pace | None = None
    ) -> Listing:
        """Like :meth:`list_pods`, plus the list's resourceVersion for a following watch;
        ``pace`` is called after each pod."""
        ...

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
    ) -> KubeObject:
        """Merge-patch the pod's annotations (and labels); ``None`` removes a key.

        Returns the pod as stored after the patch. Raises ``NotFound``.
        """
        ...

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Create the pod's ``Binding`` to ``node``, guarded by the pod's UID.

        ``annotations`` ride on the Binding: the API server sets them on the pod in the
        same update that sets its node (adding or overwriting keys, removing none), so
        a refused Binding leaves the pod's annotations as they were.

        Raises ``AlreadyBound`` (with ``.node`` when known) when the pod already has a
        node, ``UidMismatch`` when the name now belongs to another pod, ``NotFound``
        and ``KubeError`` otherwise; ``OutcomeUnknown`` when the Binding may have been
        applied all the same (no answer once sent, the server's timeout): read the
        pod to learn which.
        """
        ...

    def create_event(
        self,
        *,
        namespace: str,
        pod: str,
        uid: str = "",
        reason: str,
        message: str,
        type: EventType = "Normal",
    ) -> None:
        """Record an Event about a pod. Never raises: an event is not worth a failure."""
        ...

    def list_nodes(self) -> list[KubeObject]: ...

    def list_nodes_with_version(self, *, pace: Pace | None = None) -> Listing:
        """Every node, and the list's resourceVersion; ``pace`` is called after each."""
        ...

    def get_node(self, name: str) -> KubeObject | None:
        """The node, or ``None`` when it does not exist."""
        ...

    def patch_node_annotations(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        """Merge-patch the node's annotations; ``None`` removes a key.

        With ``resource_version`` the patch applies only if the node is still at that
        version (optimistic concurrency), else ``Conflict``. Raises ``NotFound``.
        """
        ...

    def watch_pods(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        """Pod changes after ``resource_version``, until the server ends the watch.

        With no version (``None``, ``""`` or ``"0"``) every existing pod comes first as
        ``ADDED``. Raises ``WatchExpired`` when the version is too old: list again.
        Closing the iterator early ends the watch.
        """
        ...

    def watch_nodes(
        self, resource_version: str | None = None, timeout_s: int = 60
    ) -> Iterator[WatchEvent]:
        """Node changes; the same contract as :meth:`watch_pods`."""
        ...

    def list_pdbs(self) -> list[KubeObject]:
        """Every ``policy/v1`` PodDisruptionBudget of all namespaces (preemption counts
        the victims whose budget it would break)."""
        ...

    def get_lease(self, namespace: str, name: str) -> KubeObject | None:
        """A ``coordination.k8s.io/v1`` Lease (leader election), or ``None``."""
        ...

    def create_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        """Create a Lease; ``Conflict`` when one by that name exists."""
        ...

    def replace_lease(self, namespace: str, lease: Mapping[str, object]) -> KubeObject:
        """Replace a Lease; ``Conflict`` when its ``metadata.resourceVersion`` is stale."""
        ...


def is_unversioned(resource_version: str | None) -> bool:
    """Whether a watch should start with the current state as ``ADDED`` events."""
    return resource_version in (None, "", "0")


def check_watch_args(resource_version: object, timeout_s: object) -> None:
    """Reject bad watch arguments when the watch is asked for, not at its first event."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s < 1:
        raise ValueError(f"watch timeout_s must be a positive whole number, got {timeout_s!r}")
    if resource_version is not None and not isinstance(resource_version, str):
        raise ValueError(f"watch resource_version must be a string, got {resource_version!r}")
