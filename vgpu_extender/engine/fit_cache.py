"""Remembered fit verdicts: which candidates can take a request shape, kept while their rows hold.

kube-scheduler filters pod after pod against the same candidate list, and between two
pods usually only the node the previous one was bound to changes. Whether a candidate
can take a pod depends only on the request's shape and on the candidate's own row
(see ``ClusterIndex.row_stamps``), plus index-wide data that only node registrations
and removals change (the interned device types and UUIDs a selector matches, the NUMA
ids, the grid's size), all of which move ``ClusterIndex.topology_version``. So a
verdict holds while its row's stamp and the topology version do.

Per request signature (what the share model and the plug-ins read of the request, made
by the framework) the cache keeps the selector's device mask (made under the entry's
topology version) and, for the last few candidate rows arrays it judged, each
candidate's verdict with the stamp its row had then. A rows array is known by its
contents (a copy of its bytes, compared in one ``memcmp``), never by the identity of the
array a caller hands over, so an array changed in place or a fresh array of equal rows
is judged for what it holds. From a list's second use on, the entry also holds its names
as an array, so the feasible and rejected names are picked without a Python pass over
the list (only for lists of known nodes: the unknown ones all share row -1).

Like the index, a cache is not thread-safe: callers hold the index's lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from vgpu_extender.engine.columns import BoolGrid, BoolVec, IntVec

#: Request shapes remembered at once: pods come in a few shapes (one GPU, a share of
#: one, a whole node).
DEFAULT_SHAPES = 8
#: Candidate rows arrays remembered per shape: the filter's list of every node, and
#: room for another (a second list, or bind's single node) without evicting it.
DEFAULT_LISTS = 2

#: The selector's device mask (None: it accepts every device), made on a shape's first call.
SelectorMask = Callable[[], BoolGrid | None]
#: Verdicts for some rows (-1: an unknown node), given the selector's device mask.
Judge = Callable[[BoolGrid | None, IntVec], BoolVec]
Names = npt.NDArray[np.object_]


class Remembered(NamedTuple):
    """What fit needs from the cache for one call."""

    good: BoolVec  # each candidate's verdict: the caller's own copy
    selector_mask: BoolGrid | None
    names: Names | None  # the candidates as an array (read only), once the list is seen again


class _ListVerdicts:
    """One rows array's verdicts, by position, with the stamp each row had when judged."""

    __slots__ = ("all_known", "good", "key", "names", "rows", "safe", "stamps")

    def __init__(self, key: bytes, rows: IntVec, stamps: IntVec, good: BoolVec) -> None:
        self.key = key  # the rows' bytes
        #: The array itself, when it owns its data and is read-only (``rows_of``'s
        #: are): the same one again holds the same rows, found without comparing bytes.
        frozen = rows.base is None and not rows.flags.writeable
        self.rows: IntVec | None = rows if frozen else None
        self.all_known = bool((rows >= 0).all())
        self.safe: IntVec = np.where(rows >= 0, rows, 0)  # unknown nodes read row 0's stamp
        self.stamps: IntVec = np.take(stamps, self.safe)
        self.good: BoolVec = good.copy()
        self.names: Names | None = None

    def names_of(self, candidates: Sequence[str]) -> Names | None:
        """The candidates as an array (equal rows of known nodes are equal lists under one
        topology, so any of them); None where some are unknown."""
        if not self.all_known:
            return None
        if self.names is None:
            self.names = np.empty(len(candidates), dtype=object)
            self.names[:] = candidates
        return self.names


class _ShapeVerdicts:
    """One request shape's selector mask and verdicts, for one topology version."""

    __slots__ = ("lists", "selector_mask", "topology")

    def __init__(self, topology: int, selector_mask: BoolGrid | None) -> None:
        self.topology = topology
        self.selector_mask = selector_mask
        self.lists: list[_ListVerdicts] = []  # most recently used first


class FitCache:
    """Per request shape and candidate rows array, each candidate's fit verdict, reused
    while its row's stamp and the index's topology version are unchanged."""

    def __init__(self, shapes: int = DEFAULT_SHAPES, lists: int = DEFAULT_LISTS) -> None:
        if shapes < 1 or lists < 1:
            raise ValueError("a fit cache must hold at least one shape and one list")
        self._capacity = shapes
        self._lists = lists
        self._shapes: OrderedDict[Hashable, _ShapeVerdicts] = OrderedDict()
        #: Candidates answered from the cache, and candidates judged afresh.
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        """Request shapes held."""
        return len(self._shapes)

    def lists_held(self) -> int:
        """Candidate rows arrays held, over all shapes."""
        return sum(len(shape.lists) for shape in self._shapes.values())

    def clear(self) -> None:
        self._shapes.clear()

    def good(
        self,
        key: Hashable,
        topology: int,
        candidates: Sequence[str],
        rows: IntVec,
        stamps: IntVec,
        selector_mask: SelectorMask,
        judge: Judge,
    ) -> Remembered:
        """Each candidate's verdict (``rows``: ``rows_of(candidates)``, -1 for unknown
        nodes) and the selector's device mask, judging (``judge``) only the candidates
        whose row's stamp (``stamps``, indexed by row) moved since ``key`` last judged
        this array.

        ``key`` (the request's signature) must cover everything of the request that
        ``judge`` and ``selector_mask`` read, and ``topology`` must move with everything
        index-wide they read that no row stamp covers.
        """
        shape = self._shapes.get(key)
        if shape is None or shape.topology != topology:
            shape = _ShapeVerdicts(topology, selector_mask())
            self._shapes[key] = shape
            while len(self._shapes) > self._capacity:
                self._shapes.popitem(last=False)
        self._shapes.move_to_end(key)
        mask = shape.selector_mask
        held = _find(shape.lists, rows)
        if held is None:
            good = judge(mask, rows)
            self.misses += len(rows)
            shape.lists.insert(0, _ListVerdicts(rows.tobytes(), rows, stamps, good))
            del shape.lists[self._lists :]
            return Remembered(good, mask, None)
        now = np.take(stamps, held.safe)
        moved = np.flatnonzero(now != held.stamps)
        if len(moved):
            held.good[moved] = judge(mask, rows[moved])
            held.stamps[moved] = now[moved]
        self.misses += len(moved)
        self.hits += len(rows) - len(moved)
        return Remembered(held.good.copy(), mask, held.names_of(candidates))


def _find(lists: list[_ListVerdicts], rows: IntVec) -> _ListVerdicts | None:
    """The verdicts held for these rows (the same read-only array, or equal bytes),
    moved to the front."""
    found = next((i for i, held in enumerate(lists) if held.rows is rows), None)
    if found is None:
        contents = rows.tobytes()
        found = next((i for i, held in enumerate(lists) if held.key == contents), None)
    if found is None:
        return None
    if found:
        lists.insert(0, lists.pop(found))
    return lists[0]
