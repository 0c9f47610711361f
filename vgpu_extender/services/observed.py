"""The scheduling and binding services, reporting what they decided.

Each wrapper *is a* service of the kind it wraps (the routes keep calling the same
methods) and hands every result to an observer after the work is done. Observers do
next to nothing in the caller's thread: counting a label, or queueing the outcome for
a worker. Methods the wrappers do not know are forwarded to the wrapped service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from vgpu_extender.domain import PodAssignment, PodRequest, Rejection
from vgpu_extender.services.binding import NO_CLAIM, BindingService, BindRequest, Claim
from vgpu_extender.services.inventory import NodeRef, NodeView
from vgpu_extender.services.scheduling import FilterOutcome, Priorities, SchedulingService


class FilterObserver(Protocol):
    def filtered(self, pod: Mapping[str, Any], total: int, outcome: FilterOutcome) -> None:
        """One filter answer; ``total`` is how many candidates it judged."""
        ...


class BindObserver(Protocol):
    def bound(self, args: BindRequest, error: str) -> None:
        """One bind answer; ``error`` is empty on success."""
        ...


class ObservedScheduling(SchedulingService):
    """filter and decisive filter report their outcome; everything else is forwarded."""

    def __init__(self, inner: SchedulingService, observer: FilterObserver) -> None:
        # The wrapped service holds the state; this one holds only the two references.
        self._inner = inner
        self._observer = observer

    @property
    def inner(self) -> SchedulingService:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def parse(self, pod: Mapping[str, Any]) -> PodRequest:
        return self._inner.parse(pod)

    def observe_nodes(self, nodes: Sequence[NodeView | NodeRef] | None) -> None:
        self._inner.observe_nodes(nodes)

    def filter(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> FilterOutcome:
        outcome = self._inner.filter(pod, candidates, nodes=nodes)
        self._observer.filtered(pod, len(candidates), outcome)
        return outcome

    def filter_one(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> FilterOutcome:
        outcome = self._inner.filter_one(pod, candidates, nodes=nodes)
        self._observer.filtered(pod, len(candidates), outcome)
        return outcome

    def prioritize(
        self,
        pod: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        nodes: Sequence[NodeView | NodeRef] | None = None,
    ) -> Priorities:
        return self._inner.prioritize(pod, candidates, nodes=nodes)

    def choose(self, request: PodRequest, node: str) -> PodAssignment | Rejection:
        return self._inner.choose(request, node)


class ObservedBinding(BindingService):
    """bind reports whether it succeeded; everything else is forwarded."""

    def __init__(self, inner: BindingService, observer: BindObserver) -> None:
        self._inner = inner
        self._observer = observer

    @property
    def inner(self) -> BindingService:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def bind(self, args: BindRequest, claim: Claim = NO_CLAIM) -> str:
        error = self._inner.bind(args, claim)
        self._observer.bound(args, error)
        return error
