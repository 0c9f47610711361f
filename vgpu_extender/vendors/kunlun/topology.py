"""Which XPUs of a P800 node a container takes together (HAMi's ``graghSelect``): only
1, 2, 4 or 8, over two wings of four (index 0-3 and 4-7).

- up to 4: within one wing, the wing that holds the count with the fewest fitting XPUs
  (tightest fit; ties: the lower wing), in the device policy's order;
- else 2: a cross-wing pair ``0-4, 1-5, 2-6, 3-7``; 4: a quad ``0-1-4-5, 2-3-6-7,
  0-2-4-6, 1-3-5-7, 0-3-4-7, 1-2-5-6``, the first whose XPUs all fit;
- 8: all eight.

HAMi walks slice positions, assuming the node's eight XPUs in index order; this reads
each XPU's own index.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import Device

ALLOWED_COUNTS = (1, 2, 4, 8)
WING = 4
PAIRS = ((0, 4), (1, 5), (2, 6), (3, 7))
QUADS = ((0, 1, 4, 5), (2, 3, 6, 7), (0, 2, 4, 6), (1, 3, 5, 7), (0, 3, 4, 7), (1, 2, 5, 6))


def pick_xpus(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    if count not in ALLOWED_COUNTS or len(fitting) < count:
        return None
    positions: dict[int, int] = {}
    for position, device in enumerate(fitting):
        positions.setdefault(device.index, position)
    if count <= WING:
        wings = [
            [p for p, d in enumerate(fitting) if d.index < WING],
            [p for p, d in enumerate(fitting) if d.index >= WING],
        ]
        holding = [wing for wing in wings if len(wing) >= count]
        if holding:
            return tuple(min(holding, key=len)[:count])
    groups: tuple[tuple[int, ...], ...] = ()
    if count == 2:
        groups = PAIRS
    elif count == 4:
        groups = QUADS
    elif count == 8:
        groups = (tuple(range(8)),)
    for group in groups:
        if all(index in positions for index in group):
            return tuple(positions[index] for index in group)
    return None
