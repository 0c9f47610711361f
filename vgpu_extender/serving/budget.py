"""How many connections each client address, and all of them together, may hold open.

Every client is held to ``per_client`` connections of its own address and to ``total``
connections in all. A headroom address (the loopback addresses a kube-scheduler in the
same Pod connects from) has no per-client cap, since the scheduler opens a connection
per concurrent call, and may go ``headroom`` past ``total``: however many other clients
fill the total, the scheduler still gets in. Thread-safe: the verbs' and the admin
listener's servers may share one budget.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

#: The addresses a client on this host connects from to 127.0.0.1 or ``localhost``.
#: Only these get the headroom: any other address, even elsewhere in 127.0.0.0/8, is
#: held to the total like a remote client. ``None``: a Unix socket's peer.
HEADROOM_ADDRESSES = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})


class Refusal(Enum):
    """Why a connection was not admitted (the label of the refusal metric)."""

    PER_CLIENT = "per_client"
    TOTAL = "total"


@dataclass(frozen=True, slots=True)
class Caps:
    total: int
    per_client: int
    headroom: int

    def __post_init__(self) -> None:
        for name in ("total", "per_client", "headroom"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0, got {getattr(self, name)}")


class ConnectionBudget:
    """Open connections by client address; ``admit`` before serving, ``release`` after."""

    def __init__(self, caps: Caps, headroom_addresses: Iterable[str] = HEADROOM_ADDRESSES):
        self.caps = caps
        self._headroom_addresses = frozenset(headroom_addresses)
        self._by_client: dict[str | None, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def admit(self, client: str | None) -> Refusal | None:
        """Count one more connection from ``client``, or say why it may not have one."""
        has_headroom = client is None or client in self._headroom_addresses
        ceiling = self.caps.total + (self.caps.headroom if has_headroom else 0)
        with self._lock:
            held = self._by_client.get(client, 0)
            if not has_headroom and held >= self.caps.per_client:
                return Refusal.PER_CLIENT
            if self._total >= ceiling:
                return Refusal.TOTAL
            self._by_client[client] = held + 1
            self._total += 1
        return None

    def release(self, client: str | None) -> None:
        """Forget one admitted connection of ``client``."""
        with self._lock:
            held = self._by_client.get(client, 0)
            if held <= 0:
                raise ValueError(f"release of {client!r}, which holds no connection")
            if held == 1:
                del self._by_client[client]
            else:
                self._by_client[client] = held - 1
            self._total -= 1

    @property
    def total(self) -> int:
        return self._total

    def held(self, client: str | None) -> int:
        return self._by_client.get(client, 0)
