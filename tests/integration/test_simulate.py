"""The trace replay on a small slice of the openb trace (the first 300 arrivals of seed 42).

Full replays take about a minute each and are not run here; docs/simulation.md has them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.support.server import StartExtender
from vgpu_extender.sim.arrivals import drawn_arrivals, drawn_ranks
from vgpu_extender.sim.binning import REPORT_POINTS
from vgpu_extender.sim.command import register
from vgpu_extender.sim.expected import load_paper
from vgpu_extender.sim.http_driver import ExtenderClient, replay_http, write_inventory
from vgpu_extender.sim.replay import Workload, load_workload, make_planner, replay
from vgpu_extender.sim.trace import GPU_MILLI
from vgpu_extender.vendors.registry import create_vendor

SLICE = 300
SEED = 42


@pytest.fixture(scope="module")
def workload(openb_dir: Path) -> Workload:
    return load_workload(
        openb_dir / "openb_node_list_gpu_node.csv",
        openb_dir / "openb_pod_list_default.csv",
        seed=SEED,
        arrivals_csv=openb_dir / "arrival_orders.csv.gz",
        ranks_csv=openb_dir / "node_tiebreak_ranks.csv.gz",
        limit=SLICE,
    )


def plain_bins(arrived: list[int], used: list[int], gpus: int) -> dict[int, float | None]:
    """fgd.md §5, written out with plain loops."""
    events = [
        (round(a / gpus / 10), round(u / gpus / 10, 2)) for a, u in zip(arrived, used, strict=True)
    ]
    out: dict[int, float | None] = {}
    for x in range(131):
        values = [v for arr, v in events if arr == x]
        if not values:
            values = [v for arr, v in events if x - 1 <= arr <= x + 1]
        out[x] = round(sum(values) / len(values), 2) if values else None
    return out


def test_the_slice_is_the_papers(workload: Workload) -> None:
    assert len(workload.nodes) == 1213 and workload.gpus == 6212
    assert len(workload.order) == SLICE
    assert len(workload.typical_pods()) == 35  # fgd.md §5: 35 of 91 shapes


def test_without_published_orders_a_sequence_is_drawn_to_130_percent(workload: Workload) -> None:
    capacity = workload.gpus * GPU_MILLI
    order = drawn_arrivals(workload.pods, SEED, capacity)
    total = sum(workload.pods[row].gpu_request for row in order)
    assert 1.29 * capacity < total <= 1.3 * capacity
    assert sorted(set(order[: len(workload.pods)])) == list(range(len(workload.pods)))
    ranks = drawn_ranks([n.name for n in workload.nodes], SEED)
    assert sorted(ranks.values()) == list(range(len(workload.nodes)))


@pytest.mark.parametrize("policy", ["fragmentation", "binpack"])
def test_counters_match_the_cluster_and_bins_a_plain_recomputation(
    workload: Workload, policy: str
) -> None:
    planner = make_planner(workload, policy)
    result = replay(workload, policy, planner=planner)
    index, cols = planner.index, planner.index.cols
    gpu_used = int(((cols.cores_total - cols.cores_free) * 10)[cols.valid].sum())
    assert result.used[-1] == gpu_used
    assert result.placed + result.failed == SLICE
    expected_arrived = sum(workload.pods[row].gpu_request for row in workload.order)
    assert result.arrived[-1] == expected_arrived
    assert result.curve() == plain_bins(result.arrived, result.used, workload.gpus)
    # Host CPU is charged as NodeResourcesFit counts it, never beyond a node's capacity.
    rows = index.rows_of([n.name for n in workload.nodes])
    charged = int((cols.cpu_total[rows] - cols.cpu_free[rows]).sum())
    assert charged == sum(a.cpu_milli for a in index.allocations()) > 0
    assert (cols.cpu_free[rows] >= 0).all()


def test_paper_replica_matches_the_published_bins(workload: Workload, openb_dir: Path) -> None:
    result = replay(workload, "fgd-paper")
    published = load_paper(openb_dir / "expected", "default", SEED).seed_curves["FGD"]
    covered = round(result.arrived[-1] / workload.gpus / 10) - 1  # last bin fully seen
    assert covered >= 2
    ours = result.curve()
    assert [ours[x] for x in range(covered)] == [published[x] for x in range(covered)]


def test_cli_prints_and_writes_the_json_schema(openb_dir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    out, picture = tmp_path / "out.json", tmp_path / "out.png"
    answer = CliRunner().invoke(
        app,
        [
            "--nodes", str(openb_dir / "openb_node_list_gpu_node.csv"),
            "--pods", str(openb_dir / "openb_pod_list_default.csv"),
            "--arrivals", str(openb_dir / "arrival_orders.csv.gz"),
            "--seed", str(SEED),
            "--policy", "fragmentation",
            "--limit", str(SLICE),
            "--json", str(out),
            "--plot", str(picture),
        ],
    )  # fmt: skip
    assert answer.exit_code == 0, answer.output
    assert "FGD" in answer.output and "fragmentation" in answer.output
    document = json.loads(out.read_text())
    assert document["trace"] == "default" and document["seed"] == SEED
    assert [r["policy"] for r in document["results"]] == ["fragmentation"]
    for result in document["results"]:
        assert list(result["alloc"]) == [str(x) for x in REPORT_POINTS]
    assert set(document["paper"]) == {"seed", "summary"}
    assert document["paper"]["summary"]["FGD"]["130"]["mean"] == pytest.approx(95.391)
    assert picture.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        pytest.param(["--policy", "tetris"], "unknown policy", id="unknown policy"),
        pytest.param(["--typical", "nowhere.json"], "typical pods file", id="missing typical"),
    ],
)
def test_cli_rejects_bad_options_naming_them(
    openb_dir: Path, argument: list[str], message: str
) -> None:
    app = typer.Typer()
    register(app)
    nodes = openb_dir / "openb_node_list_gpu_node.csv"
    pods = openb_dir / "openb_pod_list_default.csv"
    answer = CliRunner().invoke(
        app, ["--nodes", str(nodes), "--pods", str(pods), "--seed", "42", *argument]
    )
    assert answer.exit_code != 0
    assert message in answer.output


def test_via_http_drives_the_extender_like_kube_scheduler(
    workload: Workload, extender: StartExtender, tmp_path: Path
) -> None:
    # The 100 best-ranked nodes keep the extender's start short; early pods all fit there.
    nodes = tuple(workload.nodes_by_rank()[:100])
    first = Workload(
        workload.trace, SEED, nodes, workload.pods, workload.order[:80], workload.ranks
    )
    inventory = tmp_path / "openb.json"
    write_inventory(first, inventory, create_vendor("nvidia").encode_inventory)
    running = extender(
        inventory_file=inventory,
        node_policy="fragmentation",
        device_policy="fragmentation",
        split_count=100,
    )
    result = replay_http(first, ExtenderClient(running.client))
    assert result.failed == 0  # the cluster is nearly empty this early
    held = list(running.runtime.cluster.index.allocations())
    gpu_pods = sum(1 for row in first.order if first.pods[row].wants_gpu)
    assert len(held) == gpu_pods
    milli = sum(u.cores * 10 for a in held for _, u in a.usage)
    assert milli == result.used[-1] == result.arrived[-1] <= 80 * 8 * GPU_MILLI
