"""What kube-scheduler sends again and again, decoded and laid out once.

kube-scheduler sends filter the same candidate list for pod after pod (every node that
passed its own plugins), and prioritize the list filter answered. At 5,000 nodes,
decoding such a list means 5,000 new strings, and encoding the scores 5,000 small
objects: more than the placement itself. So:

- ``NameLists`` remembers the last few ``NodeNames`` arrays by their exact bytes; a
  list seen before costs one byte comparison and comes back as the same tuple, which
  also lets the index find its rows by identity.
- ``ScoreLayouts`` keeps, per such tuple seen twice, the encoded ``HostPriorityList``
  as rows of equal width with a two-byte hole for each score; answering is a selection
  of the rows of the hosts scored above 0 (a missing host counts as 0) and two
  vectorised stores.
  Scores are written as two characters, `` 5`` or ``10``: JSON allows the space, and
  every entry keeps a fixed width.
- ``FeasibleLayouts`` keeps, per such tuple seen twice, the tuple's JSON array and each
  name's byte span in it, so filter's answer when most candidates passed (full nodes
  are rejected pod after pod) is that array less the rejected names' spans, not 5,000
  strings encoded again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from typing import Generic, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

#: How many distinct lists to remember: filter's, prioritize's, and a spare or two.
RECENT = 4

#: A host list is laid out only while its rows, padded to the longest name, make the
#: answer at most this much larger than unpadded (names of much differing lengths are
#: encoded the ordinary way).
MAX_PADDING = 1.25

#: The two characters of each score 0..10: " 0" .. " 9", "10".
_DIGITS = np.frombuffer(b" 0 1 2 3 4 5 6 7 8 910", dtype=np.uint8).reshape(11, 2)
_CLOSE = ord("]")


class NameLists:
    """The last ``RECENT`` candidate lists, by the bytes of their JSON array."""

    def __init__(self, size: int = RECENT) -> None:
        self._size = size
        self._recent: list[tuple[bytes, tuple[str, ...]]] = []
        self._lock = threading.Lock()

    def names(self, raw: bytes, decode: Callable[[bytes], Sequence[str]]) -> tuple[str, ...]:
        """The names in ``raw`` (a JSON array of strings); ``decode`` runs on a miss.
        A list found moves to the front: filter's list, the same pod after pod, stays
        while prioritize's lists come and go (a node filling up makes a new one)."""
        recent = self._recent
        for position, (seen, names) in enumerate(recent):
            if seen == raw:
                if position:
                    with self._lock:
                        self._recent = [
                            (seen, names),
                            *(e for e in self._recent if e[1] is not names),
                        ]
                return names
        names = tuple(decode(raw))
        with self._lock:
            self._recent = [(raw, names), *self._recent[: self._size - 1]]
        return names


class _Layout:
    """One host list's encoded answer, an entry per row of equal width.

    Each entry is ``{"Host":...,"Score":00},`` right-aligned in its row by leading
    spaces (JSON allows whitespace before an array's values), so every score sits in the
    same two columns and keeping some hosts is a selection of whole rows. The answer is
    ``[``, the rows kept, and the last comma made the closing ``]``. A host scored 0 is
    left out: kube-scheduler adds nothing for a host missing from the answer, exactly as
    for one scored 0, and at 10,000 nodes the answer is otherwise twice the request.
    """

    __slots__ = ("rows",)

    def __init__(self, entries: Sequence[bytes], width: int) -> None:
        padded = b"".join(entry.rjust(width) for entry in entries)
        self.rows: npt.NDArray[np.uint8] = np.frombuffer(padded, dtype=np.uint8).reshape(
            len(entries), width
        )

    @classmethod
    def of(cls, hosts: Sequence[str]) -> _Layout | None:
        """The layout of ``hosts``, or None when their names differ so much in length
        that the padding would add more than a quarter to the answer."""
        entries = [b'{"Host":' + msgspec.json.encode(host) + b',"Score":00},' for host in hosts]
        width = max(len(entry) for entry in entries)
        if width * len(entries) > MAX_PADDING * sum(len(entry) for entry in entries):
            return None
        return cls(entries, width)

    def encode(self, scores: npt.NDArray[np.int64]) -> bytes:
        scored = scores != 0
        if not scored.any():
            return b"[]"
        if scored.all():
            out = self.rows.copy()
        else:
            kept = np.flatnonzero(scored)
            out = self.rows.take(kept, axis=0)
            scores = scores[kept]
        out[:, -4:-2] = _DIGITS[scores]
        out[-1, -1] = _CLOSE
        return b"[" + out.tobytes()


_Memo = TypeVar("_Memo")


class _TupleMemo(Generic[_Memo]):
    """Something made of a host tuple ``NameLists`` handed out, kept by the tuple's
    identity for the last ``size`` tuples; made only on a tuple's second use (a list
    answered once does not pay for it)."""

    def __init__(self, make: Callable[[tuple[str, ...]], _Memo | None], size: int = RECENT):
        self._make = make
        self._size = size
        self._recent: list[tuple[tuple[str, ...], _Memo | None]] = []
        self._once: tuple[str, ...] | None = None
        self._lock = threading.Lock()

    def get(self, hosts: tuple[str, ...]) -> _Memo | None:
        """The memo of ``hosts``; None on its first use, or where ``make`` declined it
        (remembered too: such a tuple is not tried again)."""
        for known, memo in self._recent:
            if known is hosts:
                return memo
        if self._once is not hosts:
            self._once = hosts
            return None
        memo = self._make(hosts)
        with self._lock:
            self._recent = [(hosts, memo), *self._recent[: self._size - 1]]
        return memo


class ScoreLayouts:
    """Encoded layouts for the host tuples ``NameLists`` hands out, by identity."""

    def __init__(self, size: int = RECENT) -> None:
        self._layouts = _TupleMemo(_Layout.of, size)

    def encode(self, hosts: Sequence[str], scores: npt.NDArray[np.int64]) -> bytes | None:
        """The ``HostPriorityList``, or None when ``hosts`` is not a remembered tuple or a
        score is outside 0..10 (the caller encodes those the ordinary way)."""
        if not isinstance(hosts, tuple) or len(hosts) == 0 or len(hosts) != len(scores):
            return None
        if scores.min() < 0 or scores.max() > 10:
            return None
        layout = self._layouts.get(hosts)
        return None if layout is None else layout.encode(scores)


#: The answer is cut from the array only while at most this share of the candidates
#: was rejected: a short feasible list is encoded as cheaply the ordinary way.
MAX_CUT_SHARE = 0.25


class _Spans:
    """One host tuple's JSON array, and where each name lies in it (the quotes included)."""

    __slots__ = ("array", "ends", "position", "starts")

    def __init__(self, encoded: Sequence[bytes], position: dict[str, int]) -> None:
        self.array = b"[" + b",".join(encoded) + b"]"
        lengths = np.fromiter((len(item) for item in encoded), dtype=np.int64, count=len(encoded))
        # After "[", each name and then its comma: a name ends one byte per name, and
        # the lengths of those before it and its own, in.
        ends = np.cumsum(lengths + 1)
        self.ends: list[int] = ends.tolist()
        self.starts: list[int] = (ends - lengths).tolist()
        self.position = position

    @classmethod
    def of(cls, hosts: tuple[str, ...]) -> _Spans | None:
        """The spans of ``hosts``; None when a name repeats (a rejected name would not say
        which of its places to cut)."""
        position = {host: index for index, host in enumerate(hosts)}
        if len(position) != len(hosts):
            return None
        return cls([msgspec.json.encode(host) for host in hosts], position)

    def without(
        self, hosts: tuple[str, ...], feasible: list[str], rejected: Collection[str]
    ) -> bytes | None:
        """The array of ``hosts`` less ``rejected``, if that is exactly ``feasible``."""
        try:
            cuts = sorted(self.position[name] for name in rejected)
        except KeyError:
            return None  # a reason for a name not in the list: not a cut of it
        kept = list(hosts)
        for cut in reversed(cuts):
            del kept[cut]
        if kept != feasible:  # identical strings: compared by identity, no character read
            return None
        view = memoryview(self.array)
        runs: list[memoryview] = []
        first = 0
        for cut in [*cuts, len(hosts)]:
            if cut > first:
                runs.append(view[self.starts[first] : self.ends[cut - 1]])
            first = cut + 1
        return b"[" + b",".join(runs) + b"]"


class FeasibleLayouts:
    """Filter's ``NodeNames`` answer cut from the candidates' own JSON array."""

    def __init__(self, size: int = RECENT) -> None:
        self._spans = _TupleMemo(_Spans.of, size)

    def encode(
        self, hosts: Sequence[str], feasible: list[str], rejected: Collection[str]
    ) -> bytes | None:
        """The feasible names as a JSON array, or None when ``hosts`` is not a remembered
        tuple, too many were rejected, or ``feasible`` is not ``hosts`` less ``rejected``
        (the caller encodes those the ordinary way)."""
        if not isinstance(hosts, tuple) or not rejected:
            return None
        if len(rejected) > MAX_CUT_SHARE * len(hosts):
            return None
        if len(feasible) + len(rejected) != len(hosts):
            return None
        spans = self._spans.get(hosts)
        return None if spans is None else spans.without(hosts, feasible, rejected)
