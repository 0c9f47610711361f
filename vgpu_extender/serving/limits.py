"""The serving limits of one process: open files, connection caps and timeouts.

:func:`connection_limits` is called once per process, before any server starts: it
raises the soft open-file limit to the hard one, checks that the connection caps fit
under it with room for what else the process opens, and builds the one
:class:`ConnectionGuard` every listener shares. :meth:`ServingLimits.uvicorn_options`
gives the keyword arguments of ``uvicorn.Config`` (or ``uvicorn.run``) for each listener.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from typing import Any

from vgpu_extender.serving.budget import Caps, ConnectionBudget
from vgpu_extender.serving.protocol import (
    MAX_LINGERING,
    ConnectionGuard,
    ReadTimeouts,
    protocol_class,
)
from vgpu_extender.settings import Settings

logger = logging.getLogger(__name__)

#: Standard streams, listening sockets, the event loop's, log and SQLite files, pipes.
BASE_FILES = 64
#: API server connections beyond one per bind worker: watches, the Lease, Events, the
#: client's own pool.
KUBE_FILES = 32
#: ``max_connections`` when unset: this, or what the open-file limit leaves if less.
DEFAULT_MAX_CONNECTIONS = 4096


class LimitError(ValueError):
    """The connection caps do not fit under the open-file limit (the message says how)."""


@dataclass(frozen=True, slots=True)
class ServingLimits:
    guard: ConnectionGuard
    keepalive_timeout_s: float
    file_limit: int

    def uvicorn_options(self) -> dict[str, Any]:
        """``uvicorn.Config`` keywords putting a listener under these limits."""
        return {
            # httptools, as uvicorn[standard] picks it, with the caps and timeouts.
            "http": protocol_class(self.guard),
            # No WebSocket: an upgraded connection would leave the budget's count.
            "ws": "none",
            "timeout_keep_alive": self.keepalive_timeout_s,
        }


def reserved_files(settings: Settings) -> int:
    """Open files kept aside from client connections for everything else."""
    store = 2 * settings.database_pool_size  # the pool, and as many more at peaks
    kube = 2 * settings.bind_workers + KUBE_FILES
    return BASE_FILES + store + kube + MAX_LINGERING


def raise_file_limit() -> tuple[int, int]:
    """Raise the soft open-file limit to the hard one; return (before, now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def caps_for(settings: Settings, file_limit: int) -> Caps:
    """The connection caps ``settings`` ask for, checked against ``file_limit``."""
    reserved = reserved_files(settings)
    room = file_limit - reserved - settings.loopback_headroom
    if settings.max_connections is None:
        total = min(DEFAULT_MAX_CONNECTIONS, room)
        if total < 1:
            raise LimitError(
                f"the open-file limit ({file_limit}) leaves no room for client connections: "
                f"{reserved} are kept for the store, the API server and the process, and "
                f"loopback_headroom is {settings.loopback_headroom}; raise the limit "
                "(ulimit -n) or lower database_pool_size or loopback_headroom"
            )
    else:
        total = settings.max_connections
        if total > room:
            raise LimitError(
                f"max_connections ({total}) plus loopback_headroom "
                f"({settings.loopback_headroom}) must stay under the open-file limit "
                f"({file_limit}) less the {reserved} kept for the store, the API server and "
                f"the process: at most {max(room, 0)} here; lower it or raise the limit"
            )
    return Caps(
        total=total,
        per_client=settings.max_connections_per_client,
        headroom=settings.loopback_headroom,
    )


def connection_limits(settings: Settings) -> ServingLimits:
    """Once per process, before serving: raise the file limit and build the guard."""
    before, file_limit = raise_file_limit()
    caps = caps_for(settings, file_limit)
    raised = f" (raised from {before})" if file_limit != before else ""
    logger.info(
        "open-file limit %d%s; connections: %d in all, %d per client address, %d more "
        "for 127.0.0.1 and ::1; timeouts: header %gs, body %gs, keep-alive %gs",
        file_limit,
        raised,
        caps.total,
        caps.per_client,
        caps.headroom,
        settings.header_timeout_s,
        settings.body_timeout_s,
        settings.keepalive_timeout_s,
    )
    guard = ConnectionGuard(
        ConnectionBudget(caps),
        ReadTimeouts(header_s=settings.header_timeout_s, body_s=settings.body_timeout_s),
    )
    return ServingLimits(guard, settings.keepalive_timeout_s, file_limit)
