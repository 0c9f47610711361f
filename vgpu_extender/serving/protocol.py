"""uvicorn's httptools protocol with connection caps and read timeouts.

uvicorn closes a connection idle after a response (``timeout_keep_alive``) but never
one that is still to send its first request, or that trickles a header byte a second:
enough of those exhaust the process's open files, and kube-scheduler's next call is
reset. This protocol:

- admits a connection only within its :class:`ConnectionBudget`; past it, it answers
  ``503`` with ``Connection: close`` at once, before reading anything, and closes;
- closes a connection whose request head (request line and headers) is not complete
  ``header_timeout_s`` after the connection opened or the request's first byte came,
  and one whose body is not complete ``body_timeout_s`` after its head;
- gives each request's cycle the connection through :class:`JoinedWrites`, so that an
  answer's head and body leave in one write.

Timeouts run from the start of each phase, not from the last byte: trickling does not
extend them. The application's own time is not limited here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from vgpu_extender.serving.budget import ConnectionBudget, Refusal
from vgpu_extender.serving.joined_writes import JoinedWrites

logger = logging.getLogger(__name__)

#: A refused client gets this long to read the 503 and close its side; the socket is
#: kept open meanwhile, so a request already on its way is read rather than reset.
REFUSAL_LINGER_S = 1.0
#: Refused connections lingering at once; past this a refusal closes at once. Part of
#: the open files ``limits.reserved_files`` keeps aside.
MAX_LINGERING = 64
#: Refusals and timeouts are logged at most once per kind per interval, with a count.
LOG_INTERVAL_S = 10.0

_REFUSAL_BODY = b"too many connections; retry later\n"


def _refusal_response(reason: Refusal) -> bytes:
    return b"".join(
        [
            b"HTTP/1.1 503 Service Unavailable\r\n",
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: %d\r\n" % len(_REFUSAL_BODY),
            b"connection: close\r\n",
            b"retry-after: 1\r\n",
            b"x-vgpu-refused: " + reason.value.encode() + b"\r\n",
            b"\r\n",
            _REFUSAL_BODY,
        ]
    )


_REFUSALS = {reason: _refusal_response(reason) for reason in Refusal}


@dataclass(frozen=True, slots=True)
class ReadTimeouts:
    header_s: float
    body_s: float

    def __post_init__(self) -> None:
        for name in ("header_s", "body_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0, got {getattr(self, name)}")


class _Phase(Enum):
    HEAD = "header"
    BODY = "body"
    APP = "app"
    IDLE = "idle"


class _Tally:
    """Counts of one kind of event, logged at most once per interval."""

    def __init__(self, message: str) -> None:
        self._message = message
        self._counts: dict[str, int] = {}
        self._logged_at = float("-inf")

    def add(self, key: str) -> None:
        self._counts[key] = self._counts.get(key, 0) + 1
        now = time.monotonic()
        if now - self._logged_at >= LOG_INTERVAL_S:
            summary = ", ".join(f"{k}: {n}" for k, n in sorted(self._counts.items()))
            logger.warning(self._message, summary)
            self._counts.clear()
            self._logged_at = now


class ConnectionGuard:
    """What every protocol of one process shares: the budget, timeouts and tallies."""

    def __init__(self, budget: ConnectionBudget, timeouts: ReadTimeouts) -> None:
        self.budget = budget
        self.timeouts = timeouts
        self.lingering = 0
        self.refusals = _Tally("connections refused with 503 (%s)")
        self.timeouts_hit = _Tally("connections closed by the read timeouts (%s)")


class _Refused(asyncio.Protocol):
    """A refused connection: the 503 is written; read and drop until the client closes."""

    def __init__(self, guard: ConnectionGuard, transport: asyncio.Transport) -> None:
        self._guard = guard
        self._transport = transport
        guard.lingering += 1
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()
        self._guard.lingering -= 1


def _peer_host(transport: asyncio.BaseTransport) -> str | None:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` within a :class:`ConnectionGuard` (see the module's doc)."""

    guard: ConnectionGuard  # set on the subclass :func:`protocol_class` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._host: str | None = None
        self._admitted = False
        self._phase = _Phase.HEAD
        self._deadline: asyncio.TimerHandle | None = None

    # Connection.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        host = _peer_host(transport)
        refusal = self.guard.budget.admit(host)
        if refusal is not None:
            self._refuse(transport, refusal)
            return
        self._host = host
        self._admitted = True
        super().connection_made(transport)
        self._arm(self.guard.timeouts.header_s)

    def _refuse(self, transport: asyncio.Transport, refusal: Refusal) -> None:
        self.guard.refusals.add(refusal.value)
        transport.write(_REFUSALS[refusal])
        if self.guard.lingering < MAX_LINGERING and transport.can_write_eof():
            transport.write_eof()
            transport.set_protocol(_Refused(self.guard, transport))
        else:
            transport.close()
            # Whatever it still calls lands on a protocol with nothing to do.
            transport.set_protocol(asyncio.Protocol())

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._admitted:
            self._admitted = False
            self.guard.budget.release(self._host)
        super().connection_lost(exc)

    # Read phases.
    def data_received(self, data: bytes) -> None:
        if self._phase is _Phase.IDLE:
            # The next request's first bytes (or stray line ends): its head is due.
            self._phase = _Phase.HEAD
            self._arm(self.guard.timeouts.header_s)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._phase = _Phase.BODY
        self._arm(self.guard.timeouts.body_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()
        if self.cycle is not None and self.cycle.response_complete:
            # Answered before its body was all in (a refusal): wait for the next request
            # as uvicorn would after the answer, which the last bytes cancelled.
            self._phase = _Phase.IDLE
            self._unset_keepalive_if_required()
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        else:
            self._phase = _Phase.APP

    def on_response_complete(self) -> None:
        if self._phase is _Phase.APP:
            self._phase = _Phase.IDLE  # uvicorn's keep-alive timeout runs from here
        super().on_response_complete()

    # Answers. Every cycle, pipelined ones too, starts here.
    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        cycle.transport = JoinedWrites(self.transport, self.loop)
        super()._start_asgi_task(cycle, app)

    # Deadlines.
    def _arm(self, delay_s: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(delay_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.guard.timeouts_hit.add(self._phase.value)
        self.transport.close()


def protocol_class(guard: ConnectionGuard) -> type[GuardedHttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` bound to ``guard``."""
    return type("VgpuHttpProtocol", (GuardedHttpToolsProtocol,), {"guard": guard})
