"""The vendor contract for rules over a pod: with the pod's mutex policy, and for pods of
several containers on a vendor that puts a pod on one device, the engine's fit agrees
with the exact device choice and with the plain reference on every vendor's devices,
and every node refused on a device in use is refused with the numbers or words of why.

Each vendor's devices and requests come from ``vendor_cases.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.test_vendor_contract import _cluster, _index, _place
from tests.contract.vendor_cases import CASES, VendorCase
from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
)
from vgpu_extender.engine import ClusterIndex, choose_devices, fit
from vgpu_extender.engine.reference import reference_fit

RULES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

vendors = pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))


def _pods(case: VendorCase, *, mutex: bool, most: int) -> st.SearchStrategy[list[PodRequest]]:
    pod = st.lists(case.containers, min_size=1, max_size=most).map(
        lambda shapes: tuple(
            ContainerRequest(f"c{i}", c.count, c.memory_mib, c.memory_percent, c.cores, mutex=mutex)
            for i, c in enumerate(shapes)
        )
    )
    return st.lists(pod, max_size=8).map(
        lambda pods: [PodRequest(f"p{i}", containers=c) for i, c in enumerate(pods)]
    )


def _agree(index: ClusterIndex, probe: PodRequest, *, reference: bool) -> None:
    names = index.node_names()

    def exact(row: int) -> PodAssignment | Rejection:
        return choose_devices(index, probe, index.name_of(row))

    result = fit(index, probe, names, exact=exact, remember=False)
    choice = [n for n in names if isinstance(choose_devices(index, probe, n), PodAssignment)]
    assert result.feasible == choice
    if reference:
        assert result.feasible == reference_fit(index, probe, names)
    for name, rejection in result.rejections.items():
        if rejection.reason in (Reason.EXCLUSIVE, Reason.SAME_DEVICE):
            numbered = rejection.need is not None and rejection.have is not None
            assert numbered or rejection.detail, (name, rejection)


@vendors
def test_mutex_pods_fit_as_the_choice_and_the_reference_place_them(case: VendorCase) -> None:
    @RULES
    @given(
        _cluster(case),
        _pods(case, mutex=False, most=2).filter(lambda pods: len(pods) >= 2),
        _pods(case, mutex=True, most=2),
    )
    def check(
        nodes: list[tuple[Device, ...]], earlier: list[PodRequest], probes: list[PodRequest]
    ) -> None:
        index = _index(case, nodes)
        _place(index, earlier)
        for probe in probes:
            _agree(index, probe, reference=len(probe.device_containers) == 1)
            placed = [
                verdict
                for name in index.node_names()
                if isinstance(verdict := choose_devices(index, probe, name), PodAssignment)
            ]
            for assignment in placed:
                _held_by_no_one_else(index, case, assignment)

    check()


def _held_by_no_one_else(index: ClusterIndex, case: VendorCase, assignment: PodAssignment) -> None:
    """Under the mutex policy a vendor that honours it gives only devices no pod holds."""
    if not case.vendor.share.honours_mutex:
        return
    held = {uuid for pod in index.pods_on(assignment.node) for uuid in pod.assignment.footprint()}
    given = [grant.uuid for container in assignment.containers for grant in container]
    assert not held & set(given), (held, given)
    # The pod's own earlier containers hold a device too.
    assert len(given) == len(set(given)), given


one_device = pytest.mark.parametrize(
    "case",
    [case for case in CASES.values() if case.vendor.share.one_device_per_pod],
    ids=[name for name, case in CASES.items() if case.vendor.share.one_device_per_pod],
)


@one_device
def test_pods_on_one_device_fit_as_the_choice_and_the_reference_place_them(
    case: VendorCase,
) -> None:
    @RULES
    @given(
        _cluster(case),
        _pods(case, mutex=False, most=3),
        _pods(case, mutex=False, most=3),
    )
    def check(
        nodes: list[tuple[Device, ...]], earlier: list[PodRequest], probes: list[PodRequest]
    ) -> None:
        index = _index(case, nodes)
        _place(index, earlier)
        for probe in probes:
            _agree(index, probe, reference=True)
            # Whatever device a policy prefers, the pod fits exactly where the reference
            # says: the first container takes only a device that holds the whole group.
            preferring = [
                n
                for n in index.node_names()
                if isinstance(choose_devices(index, probe, n, _highest_first), PodAssignment)
            ]
            assert preferring == reference_fit(index, probe, index.node_names())
            for name in index.node_names():
                verdict = choose_devices(index, probe, name)
                # Several containers with devices share one (a container of several
                # devices leaves none for the next).
                if isinstance(verdict, PodAssignment) and sum(map(bool, verdict.containers)) > 1:
                    assert len(_devices_of(verdict)) == 1, verdict

    check()


def _highest_first(state: Any, container: ContainerRequest, candidates: Sequence[int]) -> list[int]:
    """A device policy that prefers what the reference's order tries last."""
    return sorted(candidates, key=lambda slot: -state.devices[slot].index)


def _devices_of(assignment: PodAssignment) -> set[str]:
    return {grant.uuid for container in assignment.containers for grant in container}
