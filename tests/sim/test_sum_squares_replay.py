"""``sum-squares`` and ``ss-lookahead`` in the trace replay, on the first 300 arrivals of
the openb trace, seed 42.

Full replays (about a minute each) are in docs/simulation.md, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu_extender.policies.fragmentation import Fragmentation
from vgpu_extender.policies.host_stranding import cpu_per_milli
from vgpu_extender.policies.ss_lookahead import SsLookahead
from vgpu_extender.policies.sum_squares import SumSquares
from vgpu_extender.sim.replay import Workload, load_workload, make_planner, replay

SLICE = 300


@pytest.fixture(scope="module")
def workload(openb_dir: Path) -> Workload:
    return load_workload(
        openb_dir / "openb_node_list_gpu_node.csv",
        openb_dir / "openb_pod_list_default.csv",
        seed=42,
        arrivals_csv=openb_dir / "arrival_orders.csv.gz",
        ranks_csv=openb_dir / "node_tiebreak_ranks.csv.gz",
        limit=SLICE,
    )


POLICIES = (("sum-squares", SumSquares), ("ss-lookahead", SsLookahead))


@pytest.mark.parametrize(("name", "kind"), POLICIES)
def test_plans_for_the_traces_typical_pods(workload: Workload, name: str, kind: type) -> None:
    planner = make_planner(workload, name)
    policy = planner.profile.plugins[name]
    assert isinstance(policy, kind)
    assert policy.shapes == workload.typical_pods() and policy.learner is None


@pytest.mark.parametrize("name", [n for n, _ in POLICIES])
def test_places_every_pod_of_a_light_load_and_books_what_it_placed(
    workload: Workload, name: str
) -> None:
    planner = make_planner(workload, name)
    result = replay(workload, name, planner=planner)
    # 300 pods are a few per cent of the cluster: every one fits somewhere.
    assert (result.placed, result.failed) == (SLICE, 0)
    requested = sum(workload.pods[row].gpu_request for row in workload.order)
    assert result.used[-1] == result.arrived[-1] == requested
    cols = planner.index.cols
    rows = planner.index.rows_of([n.name for n in workload.nodes])
    booked = int((cols.cores_total[rows] - cols.cores_free[rows]).sum())
    assert booked * 10 == requested  # 100 cores a GPU, the trace's milli per GPU


def test_ss_lookahead_charges_host_cpu_stranding_at_the_traces_ratio(workload: Workload) -> None:
    # The trace's typical GPU pods ask 10.91 milli of host CPU per milli of GPU share
    # (docs/simulation.md, "Host CPU stranding"); fgd-paper charges nothing.
    planner = make_planner(workload, "ss-lookahead")
    policy = planner.profile.plugins["ss-lookahead"]
    assert isinstance(policy, SsLookahead) and policy.host_strand == 1.0
    assert cpu_per_milli(policy.compiled()) == pytest.approx(10.91, abs=0.005)
    paper = make_planner(workload, "fgd-paper").profile.plugins["fgd-paper"]
    assert isinstance(paper, Fragmentation) and paper.host_strand == 0.0
