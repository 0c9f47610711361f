"""The share model's stage table, evaluated on a grid and on one device, agrees with itself.

Each stage is written once (``vendors/nvidia/share.py``) and serves the vectorised fit and
explanation (NumPy grids) and the exact choice, the reference and the store's re-check
(ints): here the two evaluations are compared cell by cell on random devices and shares.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu_extender.domain import ContainerRequest, DeviceUsage, Reason
from vgpu_extender.domain.share import Capacity
from vgpu_extender.engine.rules import (
    cumulative_masks,
    first_failing,
    fits_when_empty,
    fitting_mask,
    misfit_on_device,
)
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

devices = st.tuples(
    st.integers(0, 4),  # slots total
    st.integers(0, 4),  # slots used
    st.sampled_from([0, 1000, 8000, 24576]),  # memory total
    st.integers(0, 30000),  # memory used
    st.sampled_from([0, 50, 100, 200]),  # cores total
    st.integers(0, 200),  # cores used
)
containers = st.builds(
    ContainerRequest,
    name=st.just("c"),
    count=st.just(1),
    memory_mib=st.sampled_from([0, 1, 1000, 8000, 30000]),
    memory_percent=st.sampled_from([0, 25, 50, 100]),
    cores=st.sampled_from([0, 10, 50, 100]),
)


def _grid(cells: list[tuple[int, int, int, int, int, int]]) -> tuple[Capacity, Capacity]:
    """The cells as a one-row grid: (free, total)."""
    a = np.array(cells, dtype=np.int64).reshape(1, len(cells), 6)
    total = Capacity(a[..., 0], a[..., 2], a[..., 4])
    return Capacity(a[..., 0] - a[..., 1], a[..., 2] - a[..., 3], a[..., 4] - a[..., 5]), total


def _one(cell: tuple[int, int, int, int, int, int]) -> tuple[Capacity, Capacity]:
    slots, slots_used, memory, memory_used, cores, cores_used = cell
    free = Capacity(slots - slots_used, memory - memory_used, cores - cores_used)
    return free, Capacity(slots, memory, cores)


@settings(max_examples=300, deadline=None)
@given(st.lists(devices, min_size=1, max_size=8), containers)
def test_the_grid_and_one_device_give_the_same_verdict(
    cells: list[tuple[int, int, int, int, int, int]], container: ContainerRequest
) -> None:
    free, total = _grid(cells)
    within = np.ones(free.slots.shape, dtype=np.bool_)
    on_grid = fitting_mask(NVIDIA_SHARE, free, total, container, within)[0].tolist()
    one_by_one = [first_failing(NVIDIA_SHARE, *_one(c), container) is None for c in cells]
    assert on_grid == one_by_one
    # The first failing stage is the first cumulative mask a device drops out of.
    stages, masks = cumulative_masks(NVIDIA_SHARE, free, total, container, within)
    for position, cell in enumerate(cells):
        failed = first_failing(NVIDIA_SHARE, *_one(cell), container)
        dropped = next((s for s, m in zip(stages, masks, strict=True) if not m[0, position]), None)
        assert failed == dropped
    # With nothing allocated: the one-device verdict on an empty device, by the stages
    # that can fail there (memory and cores; not slots, exclusivity or compute left).
    empty = fits_when_empty(NVIDIA_SHARE, total, container, within)[0].tolist()
    capacity = [s for s in NVIDIA_SHARE.stages_for(container) if s.when_empty]
    assert empty == [
        first_failing(NVIDIA_SHARE, _one(c)[1], _one(c)[1], container, capacity) is None
        for c in cells
    ]


def test_a_device_without_slots_or_cores_is_not_called_unresolvable() -> None:
    """As before the stage table: only memory and cores decide that preemption cannot
    help; a device registered with count 0 or devcore 0 leaves it to the other stages."""
    total = Capacity(np.array([[0, 2]]), np.array([[8000, 8000]]), np.array([[100, 0]]))
    within = np.ones((1, 2), dtype=np.bool_)
    no_cores = ContainerRequest("c", 1, memory_mib=1000)
    assert fits_when_empty(NVIDIA_SHARE, total, no_cores, within)[0].tolist() == [True, True]
    too_big = ContainerRequest("c", 1, memory_mib=9000)
    assert fits_when_empty(NVIDIA_SHARE, total, too_big, within)[0].tolist() == [False, False]


def test_the_nvidia_stages_go_in_hamis_order() -> None:
    shared = ContainerRequest("c", 1, memory_mib=1000, cores=10)
    exclusive = ContainerRequest("c", 1, memory_mib=1000, cores=100)
    no_cores = ContainerRequest("c", 1, memory_mib=1000)
    reasons = [s.reason for s in NVIDIA_SHARE.stages_for(shared)]
    assert reasons == [Reason.SLOTS, Reason.MEMORY, Reason.CORES]
    reasons = [s.reason for s in NVIDIA_SHARE.stages_for(exclusive)]
    assert reasons == [Reason.SLOTS, Reason.EXCLUSIVE, Reason.MEMORY, Reason.CORES]
    reasons = [s.reason for s in NVIDIA_SHARE.stages_for(no_cores)]
    assert reasons == [Reason.SLOTS, Reason.MEMORY, Reason.NO_COMPUTE]


@pytest.mark.parametrize(
    ("used", "want", "reason", "text"),
    [
        (DeviceUsage(0, 0, 3), DeviceUsage(10, 0, 1), Reason.SLOTS, "slots 4/3"),
        (DeviceUsage(10, 10, 1), DeviceUsage(10, 100, 1), Reason.EXCLUSIVE, "in use by 1 "),
        (DeviceUsage(7000, 0, 1), DeviceUsage(2000, 0, 1), Reason.MEMORY, "memory 9000/8000 MiB"),
        (DeviceUsage(0, 90, 1), DeviceUsage(10, 20, 1), Reason.CORES, "cores 110/100"),
        (DeviceUsage(0, 100, 1), DeviceUsage(10, 0, 1), Reason.NO_COMPUTE, "(100/100)"),
        (DeviceUsage(7000, 90, 2), DeviceUsage(1000, 10, 1), None, ""),
    ],
)
def test_the_store_recheck_names_the_first_failing_stage(
    used: DeviceUsage, want: DeviceUsage, reason: Reason | None, text: str
) -> None:
    failed = misfit_on_device(
        NVIDIA_SHARE,
        "device g0 on n",
        Capacity(used.slots, used.memory_mib, used.cores),
        Capacity(3, 8000, 100),
        NVIDIA_SHARE.held(want),
    )
    if reason is None:
        assert failed is None
    else:
        assert failed is not None
        stage, message = failed
        assert stage.reason is reason and text in message, message
        assert message.startswith("device g0 on n ")
