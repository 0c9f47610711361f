"""The fit re-check's committed usage read from stored grants equals the one of the
pods' assignments, whatever the pods, their init containers and the rows' order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.store.capacity import HeldGrant, committed_by_grants, committed_usage

UUIDS = ("g0", "g1", "g2")


@st.composite
def pods(draw: st.DrawFn) -> PodAssignment:
    """A pod of one to three containers, some of them init containers, each holding
    a share of distinct devices."""
    positions = draw(st.integers(1, 3))
    containers = []
    for _ in range(positions):
        uuids = draw(st.lists(st.sampled_from(UUIDS), max_size=len(UUIDS), unique=True))
        containers.append(
            tuple(
                DeviceGrant(u, draw(st.integers(0, 9000)), draw(st.integers(0, 100))) for u in uuids
            )
        )
    init = tuple(draw(st.lists(st.booleans(), min_size=positions, max_size=positions)))
    return PodAssignment("n", tuple(containers), init if any(init) else ())


def held(uid: str, assignment: PodAssignment) -> list[HeldGrant]:
    return [
        HeldGrant(uid, g.uuid, assignment.is_init(position), g.memory_mib, g.cores)
        for position, grants in enumerate(assignment.containers)
        for g in grants
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(pods(), max_size=6), st.randoms(use_true_random=False))
def test_grants_give_the_usage_of_their_pods(
    assignments: list[PodAssignment], order: random.Random
) -> None:
    rows = [row for n, a in enumerate(assignments) for row in held(f"p{n}", a)]
    order.shuffle(rows)
    assert committed_by_grants(rows) == committed_usage(assignments)
