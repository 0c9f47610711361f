"""The contract every vendor passes: its codecs round-trip, its share model's stages agree
with themselves on grids and on single devices, the engine's fit agrees with the plain
reference and with the exact device choice on its devices, no apply and release sequence
over-allocates any dimension and releasing restores the exact state, and every reason a
node is refused with carries its numbers.

Each vendor's devices and requests come from ``vendor_cases.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.vendor_cases import CASES, VendorCase
from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceUsage,
    NodeInventory,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
)
from vgpu_extender.domain.share import Capacity, as_mutex
from vgpu_extender.engine import ClusterIndex, choose_devices, fit
from vgpu_extender.engine.reference import reference_fit
from vgpu_extender.engine.rules import first_failing, fitting_mask
from vgpu_extender.vendors.registry import VENDORS

CONTRACT = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Reasons of a usage stage (a share that does not fit what is left): they name numbers.
USAGE = {Reason.SLOTS, Reason.EXCLUSIVE, Reason.MEMORY, Reason.CORES, Reason.NO_COMPUTE}

vendors = pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))


def test_every_registered_vendor_has_a_contract_case() -> None:
    assert set(VENDORS) == {name.split(":")[0] for name in CASES}


def _index(case: VendorCase, nodes: list[tuple[Device, ...]]) -> ClusterIndex:
    index = ClusterIndex(initial_nodes=2, initial_slots=2, share=case.vendor.share)
    for i, devices in enumerate(nodes):
        index.upsert_node(NodeInventory(f"n{i}", devices))
    return index


def _cluster(case: VendorCase) -> st.SearchStrategy[list[tuple[Device, ...]]]:
    return st.lists(st.integers(0, 3), min_size=1, max_size=4).flatmap(
        lambda picks: st.tuples(*(case.devices(f"n{i}") for i in range(len(picks)))).map(list)
    )


def _pods(case: VendorCase) -> st.SearchStrategy[list[PodRequest]]:
    pod = st.lists(case.containers, min_size=1, max_size=2).map(
        lambda shapes: tuple(
            ContainerRequest(f"c{i}", c.count, c.memory_mib, c.memory_percent, c.cores)
            for i, c in enumerate(shapes)
        )
    )
    return st.lists(pod, max_size=10).map(
        lambda pods: [PodRequest(f"p{i}", containers=c) for i, c in enumerate(pods)]
    )


def _place(index: ClusterIndex, pods: list[PodRequest]) -> list[str]:
    """Each pod on the first node that takes it; the uids placed."""
    placed = []
    for pod in pods:
        for name in index.node_names():
            verdict = choose_devices(index, pod, name)
            if isinstance(verdict, PodAssignment):
                index.apply(pod.uid, verdict)
                placed.append(pod.uid)
                break
    return placed


def _columns(index: ClusterIndex) -> dict[str, np.ndarray]:
    cols = index.cols
    return {name: getattr(cols, name).copy() for name in (*cols._GRIDS, *cols._VECTORS)}


@vendors
def test_the_inventory_codec_round_trips(case: VendorCase) -> None:
    @CONTRACT
    @given(case.devices("node"))
    def check(devices: tuple[Device, ...]) -> None:
        vendor = case.vendor
        ours = tuple(
            Device(
                d.uuid,
                d.index,
                d.count,
                d.memory_mib,
                d.cores,
                d.type,
                d.numa,
                d.mode,
                d.healthy,
                vendor.name,
                d.custom_info,
            )
            for d in devices
        )
        assert vendor.decode_inventory(vendor.encode_inventory(ours)) == ours

    check()


@vendors
def test_the_assignment_codec_round_trips(case: VendorCase) -> None:
    @CONTRACT
    @given(_cluster(case), _pods(case))
    def check(nodes: list[tuple[Device, ...]], pods: list[PodRequest]) -> None:
        index = _index(case, nodes)
        for uid in _place(index, pods):
            allocation = index.allocation(uid)
            assert allocation is not None
            assignment = allocation.assignment
            value = case.vendor.encode_assignment(assignment)
            decoded = case.vendor.decode_assignment(value, init=assignment.init)
            assert decoded == assignment.containers

    check()


@vendors
def test_the_share_stages_agree_on_grids_and_on_devices(case: VendorCase) -> None:
    share = case.vendor.share

    @CONTRACT
    @given(
        case.devices("node").filter(bool),
        case.containers,
        st.lists(st.integers(0, 30000), min_size=12, max_size=12),
    )
    def check(devices: tuple[Device, ...], container: ContainerRequest, used: list[int]) -> None:
        cells = [
            (
                d.count,
                used[3 * (i % 4)] % (d.count + 2),
                d.memory_mib,
                used[3 * (i % 4) + 1],
                d.cores,
                used[3 * (i % 4) + 2] % (d.cores + 20),
            )
            for i, d in enumerate(devices)
        ]
        a = np.array(cells, dtype=np.int64).reshape(1, len(cells), 6)
        total = Capacity(a[..., 0], a[..., 2], a[..., 4])
        free = Capacity(a[..., 0] - a[..., 1], a[..., 2] - a[..., 3], a[..., 4] - a[..., 5])
        within = np.ones((1, len(cells)), dtype=np.bool_)
        on_grid = fitting_mask(share, free, total, container, within)[0].tolist()
        one_by_one = [
            first_failing(share, Capacity(s - su, m - mu, c - cu), Capacity(s, m, c), container)
            is None
            for s, su, m, mu, c, cu in cells
        ]
        assert on_grid == one_by_one

    check()


@vendors
def test_a_held_share_re_checked_for_a_mutex_pod_keeps_its_numbers(case: VendorCase) -> None:
    # The store re-checks a mutex pod's devices with its held share made mutex: the
    # same numbers, the mutex stage in force where the vendor honours the policy.
    share = case.vendor.share
    held = share.held(DeviceUsage(memory_mib=1024, cores=10, slots=1))
    mutex = as_mutex(held)
    assert mutex.mutex and not held.mutex
    assert (mutex.slots, mutex.memory_mib, mutex.cores, mutex.exclusive) == (
        held.slots,
        held.memory_mib,
        held.cores,
        held.exclusive,
    )
    in_use = Capacity(3, 10_000, 90)  # free on a device of 4 slots: one share in use
    total = Capacity(4, 16_384, 100)
    refused = first_failing(share, in_use, total, mutex)
    if share.honours_mutex:
        assert refused is not None and refused.reason is Reason.EXCLUSIVE
    else:  # the policy does not bind this vendor's devices
        assert refused == first_failing(share, in_use, total, held)


@vendors
def test_fit_agrees_with_the_reference_and_the_exact_choice(case: VendorCase) -> None:
    @CONTRACT
    @given(_cluster(case), _pods(case).filter(lambda pods: len(pods) >= 3), _pods(case))
    def check(
        nodes: list[tuple[Device, ...]], earlier: list[PodRequest], probes: list[PodRequest]
    ) -> None:
        index = _index(case, nodes)
        _place(index, earlier)
        names = index.node_names()
        for probe in probes:
            # The exact check is the planner's: a vendor's topology rule, or several
            # containers, have the device choice confirm each node the grid passes.
            def exact(row: int, probe: PodRequest = probe) -> PodAssignment | Rejection:
                return choose_devices(index, probe, index.name_of(row))

            result = fit(index, probe, names, exact=exact, remember=False)
            choice = [
                n for n in names if isinstance(choose_devices(index, probe, n), PodAssignment)
            ]
            assert result.feasible == choice
            if len(probe.device_containers) == 1:
                assert result.feasible == reference_fit(index, probe, names)
            for name, rejection in result.rejections.items():
                assert name not in result.feasible
                if rejection.reason is Reason.NO_COMPUTE:  # its number is the zero it names
                    words = case.vendor.wording
                    text = words.text(Reason.NO_COMPUTE)
                    assert rejection.message(words).startswith(text), rejection
                elif rejection.reason in USAGE:
                    numbered = rejection.need is not None and rejection.have is not None
                    assert numbered or rejection.detail, (name, rejection)

    check()


@vendors
def test_apply_and_release_never_over_allocate_and_release_restores(case: VendorCase) -> None:
    @CONTRACT
    @given(_cluster(case), _pods(case))
    def check(nodes: list[tuple[Device, ...]], pods: list[PodRequest]) -> None:
        index = _index(case, nodes)
        empty = _columns(index)
        placed = _place(index, pods)
        cols = index.cols
        for free, total in (
            (cols.slots_free, cols.slots_total),
            (cols.mem_free, cols.mem_total),
            (cols.cores_free, cols.cores_total),
        ):
            assert (free[cols.valid] >= 0).all() and (free <= total).all()
        for uid in reversed(placed):
            index.release(uid)
        after = _columns(index)
        for name, column in empty.items():
            np.testing.assert_array_equal(after[name], column, err_msg=name)

    check()
