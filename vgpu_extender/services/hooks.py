"""What the services report as they work, given to them when they are built.

The composition root (``Runtime.build``) passes the hooks in; the HTTP layer supplies
them (metrics, the Events of unschedulable pods). A hook does next to nothing in the
caller's thread: counting a label, or queueing the outcome for a worker. Every hook is
optional: a service built without one reports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vgpu_extender.services.bind_ports import BindRequest
    from vgpu_extender.services.scheduling import FilterOutcome


class FilterObserver(Protocol):
    def filtered(self, pod: Mapping[str, Any], total: int, outcome: FilterOutcome) -> None:
        """One filter answer; ``total`` is how many candidates it judged."""
        ...


class BindObserver(Protocol):
    def bound(self, args: BindRequest, error: str) -> None:
        """One bind answer; ``error`` is empty on success."""
        ...


def _ignore(*_args: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ServiceHooks:
    """The hooks the services are built with."""

    filtered: FilterObserver | None = None
    bound: BindObserver | None = None
    #: The number of binds in each store transaction.
    bind_batch: Callable[[int], None] = _ignore
    #: An Event dropped because its queue was full.
    event_dropped: Callable[[], None] = _ignore
