"""Free capacity as the fragmentation policy counts it, for memory handed out in pieces.

A vNPU template takes a fixed piece of a card's memory (910B3: 16 GiB or 32 GiB, or the
whole card). Free memory that no template fits in any more cannot be used, so it counts
as used: ``g`` counts whole quanta (16 GiB), at most one largest piece (32 GiB) per free
slot, and all of it on an empty card. GPUs (memory in any amount) count every MiB.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vgpu_extender.domain import Device, DeviceGrant, NodeInventory, PodAssignment
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.policies.fragment_math import Devices, share
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

CARD = 65_536
TEMPLATED = replace(NVIDIA_SHARE, name="TEMPLATED", memory_quantum=16_384, memory_piece=32_768)


def _g(model: ShareModel, used: list[int], slots: int = 4) -> int:
    """``g`` of one card of ``slots`` slots with shares of ``used`` MiB on it."""
    index = ClusterIndex(share=model)
    index.upsert_node(
        NodeInventory("n", (Device("d", count=slots, memory_mib=CARD, cores=100, vendor="X"),))
    )
    for i, memory in enumerate(used):
        index.apply(f"p{i}", PodAssignment("n", ((DeviceGrant("d", memory, 0, "X"),),)))
    d = Devices.of_rows(index, index.rows_of(["n"]))
    return int(share(d.mem_free, d.cores_free, d.slots_free, d)[0, 0])


@pytest.mark.parametrize(
    ("used", "slots", "expected"),
    [
        ([], 4, 1000),  # empty: the whole card (a whole-card request can still take it)
        ([25_536], 4, 500),  # 40000 free: two 16 GiB quanta = 32768 MiB = 500 milli
        ([45_536], 4, 250),  # 20000 free: one quantum
        ([50_000], 4, 0),  # 15536 free: no template fits
        ([8_192], 1, 0),  # no slot left once taken... (4 - 1 = 0 free of 1)
        ([1_000], 2, 500),  # 64536 free, one free slot: at most one 32 GiB piece
    ],
    ids=["empty", "two-quanta", "one-quantum", "stranded", "no-slot", "one-piece-per-slot"],
)
def test_templated_memory_counts_only_what_can_still_be_carved(
    used: list[int], slots: int, expected: int
) -> None:
    assert _g(TEMPLATED, used, slots) == expected


def test_memory_in_any_amount_counts_every_mib() -> None:
    assert _g(NVIDIA_SHARE, [25_536]) == 40_000 * 1000 // CARD
    assert _g(NVIDIA_SHARE, [50_000]) == 15_536 * 1000 // CARD
    assert np.isclose(_g(NVIDIA_SHARE, []), 1000)
