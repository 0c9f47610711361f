"""The topology term of the node score (HAMi's Ascend ring bonus), with worked numbers.

Two rings of four devices per node (group 0: devices 0-3, group 1: devices 4-7). For a
container of ``count`` devices the term is ``10 x min(count, most fitting in one ring) /
count``: a 4-device job scores 10 where one ring has four free devices and 5 where the
best ring has two.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    NodeInventory,
    PodAssignment,
    PodRequest,
)
from vgpu_extender.domain.share import ShareModels
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import Planner
from vgpu_extender.engine.topology import topology_scores
from vgpu_extender.policies import default_profile
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

RINGED = replace(NVIDIA_SHARE, name="RINGED", group_key="NetworkID")


def _node(name: str, *, grouped: bool = True) -> NodeInventory:
    return NodeInventory(
        name,
        tuple(
            Device(
                f"{name}-{i}",
                index=i,
                count=1,
                memory_mib=1000,
                vendor="RINGED",
                custom_info=(("NetworkID", i // 4),) if grouped or i else (),
            )
            for i in range(8)
        ),
    )


def _index() -> ClusterIndex:
    index = ClusterIndex(shares=ShareModels(RINGED, (("RINGED", RINGED),)))
    for name in ("whole-ring", "split", "ungrouped"):
        index.upsert_node(_node(name, grouped=name != "ungrouped"))
    # whole-ring: ring 1 taken (4 free in ring 0); split: two taken in each ring.
    taken = {"whole-ring": (4, 5, 6, 7), "split": (0, 1, 4, 5)}
    for name, devices in taken.items():
        for i in devices:
            grant = DeviceGrant(f"{name}-{i}", 1000, 0, "RINGED")
            index.apply(f"{name}-pod-{i}", PodAssignment(name, ((grant,),)))
    return index


def _job(count: int) -> PodRequest:
    return PodRequest("job", containers=(ContainerRequest("c", count, 1000, vendor="RINGED"),))


def test_a_job_scores_the_share_one_ring_can_hold() -> None:
    index = _index()
    rows = index.rows_of(["whole-ring", "split", "ungrouped"])
    # whole-ring: 4 of 4 in ring 0 -> 10. split: 2 of 4 at best -> 5. ungrouped: a fitting
    # device without a ring -> 0.
    np.testing.assert_allclose(topology_scores(index, _job(4), rows), [10.0, 5.0, 0.0])
    # Three devices: 10 x min(3, 4) / 3 = 10 and 10 x 2 / 3.
    np.testing.assert_allclose(topology_scores(index, _job(3), rows), [10.0, 20 / 3, 0.0])


def test_single_devices_and_vendors_without_groups_add_nothing() -> None:
    index = _index()
    rows = index.rows_of(["whole-ring", "split"])
    assert topology_scores(index, _job(1), rows) is None
    plain = ClusterIndex(share=NVIDIA_SHARE)
    plain.upsert_node(_node("n"))
    assert topology_scores(plain, _job(4), plain.rows_of(["n"])) is None


def test_the_term_follows_the_nodes_as_they_change() -> None:
    index = _index()
    rows = index.rows_of(["whole-ring"])
    assert topology_scores(index, _job(4), rows).tolist() == [10.0]
    grant = DeviceGrant("whole-ring-0", 1000, 0, "RINGED")
    index.apply("late", PodAssignment("whole-ring", ((grant,),)))
    assert topology_scores(index, _job(4), rows).tolist() == [7.5]  # 3 of 4 in ring 0


def test_the_planner_adds_the_term_to_the_node_score() -> None:
    index = _index()
    planner = Planner(index, default_profile())
    rows = index.rows_of(["whole-ring", "split"])
    job = _job(4)
    with_term = planner.scores(job, rows)
    usage = np.asarray(planner.node_scorer(job).score_nodes(index, job, rows))
    # Both nodes hold four of eight devices: the usage score ties, the ring decides.
    assert usage[0] == usage[1]
    np.testing.assert_allclose(with_term - usage, [10.0, 5.0])
