"""Node-state scores remembered between pods.

A policy whose score of a node depends on that node's state alone (and on the pod) need
not score every node for every pod: between two pods only the nodes that received one
change state, and the states are numbered (``RowStates``). ``StateScores`` keeps, for the
last few scoring keys (the pod's shape, the typical pods' version, the numbering's
generation), one score per state id, and computes only the states it has not seen.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from vgpu_extender.engine.framework import FloatVec, IntVec
from vgpu_extender.policies.fragment_math import BoolArr


@dataclass(slots=True)
class _Known:
    values: FloatVec
    known: BoolArr


@dataclass(slots=True)
class StateScores:
    """Scores per state id for the ``keep`` most recent keys."""

    keep: int = 16
    _by_key: OrderedDict[Hashable, _Known] = field(default_factory=OrderedDict)

    def scores(self, key: Hashable, ids: IntVec, compute: Callable[[IntVec], FloatVec]) -> FloatVec:
        """The score of each state in ``ids`` under ``key``; ``compute(positions)``
        scores the states at those positions of ``ids`` that are not known yet."""
        memo = self._by_key.get(key)
        if memo is None:
            memo = _Known(np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.bool_))
            self._by_key[key] = memo
            while len(self._by_key) > self.keep:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        size = int(ids.max()) + 1 if len(ids) else 0
        if size > len(memo.known):
            grown = max(size, 2 * len(memo.known))
            memo.values = np.resize(memo.values, grown)
            memo.known = np.concatenate(
                [memo.known, np.zeros(grown - len(memo.known), dtype=np.bool_)]
            )
        missing = np.flatnonzero(~memo.known[ids])
        if len(missing):
            # A state may appear more than once among ``ids``: the last write wins, and
            # every write is the same state's score.
            memo.values[ids[missing]] = compute(missing)
            memo.known[ids[missing]] = True
        out: FloatVec = memo.values[ids]
        return out
