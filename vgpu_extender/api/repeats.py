"""What kube-scheduler sends again and again, decoded and laid out once.

kube-scheduler sends filter the same candidate list for pod after pod (every node that
passed its own plugins), and prioritize the list filter answered. At 5,000 nodes,
decoding such a list means 5,000 new strings, and encoding the scores 5,000 small
objects: more than the placement itself. So:

- ``NameLists`` remembers the last few ``NodeNames`` arrays by their exact bytes; a
  list seen before costs one byte comparison and comes back as the same tuple, which
  also lets the index find its rows by identity.
- ``ScoreLayouts`` keeps, per such tuple seen twice, the encoded ``HostPriorityList``
  with a two-byte hole for each score; answering is a copy, two vectorised stores and a
  vectorised selection of the hosts scored above 0 (a missing host counts as 0).
  Scores are written as two characters, `` 5`` or ``10``: JSON allows the space, and
  every entry keeps a fixed width.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

#: How many distinct lists to remember: filter's, prioritize's, and a spare or two.
RECENT = 4

#: The two characters of each score 0..10: " 0" .. " 9", "10".
_TENS = np.frombuffer(b"          1", dtype=np.uint8)
_UNITS = np.frombuffer(b"01234567890", dtype=np.uint8)
_CLOSE = ord("]")


class NameLists:
    """The last ``RECENT`` candidate lists, by the bytes of their JSON array."""

    def __init__(self, size: int = RECENT) -> None:
        self._size = size
        self._recent: list[tuple[bytes, tuple[str, ...]]] = []
        self._lock = threading.Lock()

    def names(self, raw: bytes, decode: Callable[[bytes], Sequence[str]]) -> tuple[str, ...]:
        """The names in ``raw`` (a JSON array of strings); ``decode`` runs on a miss."""
        for seen, names in self._recent:
            if seen == raw:
                return names
        names = tuple(decode(raw))
        with self._lock:
            self._recent = [(raw, names), *self._recent[: self._size - 1]]
        return names


class _Layout:
    """One host list's encoded answer, and where each score goes in it.

    Each entry is laid out as ``{"Host":...,"Score":00},``: the answer is ``[`` and the
    entries kept, the last comma made the closing ``]``. A host scored 0 is left out:
    kube-scheduler adds nothing for a host missing from the answer, exactly as for one
    scored 0, and at 10,000 nodes the answer is otherwise twice the request.
    """

    __slots__ = ("entries", "lengths", "tens_at", "units_at")

    def __init__(self, hosts: Sequence[str]) -> None:
        heads = [b'{"Host":' + msgspec.json.encode(host) + b',"Score":' for host in hosts]
        # Each entry is head + two score characters + "}" + ",".
        self.lengths: npt.NDArray[np.int64] = np.fromiter(
            (len(h) + 4 for h in heads), dtype=np.int64, count=len(heads)
        )
        starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1]))
        self.tens_at: npt.NDArray[np.int64] = starts + self.lengths - 4
        self.units_at: npt.NDArray[np.int64] = self.tens_at + 1
        self.entries = np.frombuffer(b"".join(h + b"00}," for h in heads), dtype=np.uint8)

    def encode(self, scores: npt.NDArray[np.int64]) -> bytes:
        out = self.entries.copy()
        out[self.tens_at] = _TENS[scores]
        out[self.units_at] = _UNITS[scores]
        scored = scores != 0
        if not scored.all():
            out = out[np.repeat(scored, self.lengths)]
            if len(out) == 0:
                return b"[]"
        out[-1] = _CLOSE
        return b"[" + out.tobytes()


class ScoreLayouts:
    """Encoded layouts for the host tuples ``NameLists`` hands out, by identity."""

    def __init__(self, size: int = RECENT) -> None:
        self._size = size
        self._recent: list[tuple[tuple[str, ...], _Layout]] = []
        self._once: tuple[str, ...] | None = None  # a layout pays off from the second use
        self._lock = threading.Lock()

    def encode(self, hosts: Sequence[str], scores: npt.NDArray[np.int64]) -> bytes | None:
        """The ``HostPriorityList``, or None when ``hosts`` is not a remembered tuple or a
        score is outside 0..10 (the caller encodes those the ordinary way)."""
        if not isinstance(hosts, tuple) or len(hosts) == 0 or len(hosts) != len(scores):
            return None
        if scores.min() < 0 or scores.max() > 10:
            return None
        for known, layout in self._recent:
            if known is hosts:
                return layout.encode(scores)
        if self._once is not hosts:
            self._once = hosts
            return None
        layout = _Layout(hosts)
        with self._lock:
            self._recent = [(hosts, layout), *self._recent[: self._size - 1]]
        return layout.encode(scores)
