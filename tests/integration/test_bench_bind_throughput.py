"""The whole-cycle benchmark's harness: its rows, its proof that pods were bound, its
failures, and the API server it runs in a process of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client as k8s

from benchmarks import bind_throughput as bench
from tests.support.apiserver_process import ApiServerProcess
from tests.support.server import node_json, pod_json, spawn_extender, write_kubeconfig

#: The extender's and the API server's CPU time are read from /proc, where there is one.
CPU_FIELDS = (
    (
        "extender_cpu_ms_per_cycle",
        "extender_bound_cycles_per_s",
        "extender_kernel_share",
        "extender_switches_per_cycle",
        "apiserver_cpu_ms_per_cycle",
    )
    if Path("/proc/self/stat").exists()
    else ()
)


def test_quick_run_writes_one_row_per_store(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VGPU_BENCH_POSTGRES_URL", postgres_url)
    out = tmp_path / "bind.json"

    assert bench.main(["--quick", "--json", str(out)]) == 0

    written = json.loads(out.read_text())
    assert written["benchmark"] == "bind_throughput"
    rows = written["results"]
    assert [r["store"] for r in rows] == ["sqlite", "postgresql"]
    for row in rows:
        assert set(row) == {
            "case",
            "store",
            "nodes",
            "mode",
            "binders",
            "pods",
            "cycles_per_s",
            "median_ms",
            "p99_ms",
            "refused",
            "client_cpu_ms_per_cycle",
            "cpu_gauge_ms",
            "runs",
            "cycles_per_s_runs",
            "binds_per_transaction",
            "server_filter_ms",
            "server_prioritize_ms",
            "server_bind_ms",
            *CPU_FIELDS,
        }
        assert row["case"] == "filter+prioritize+bind"
        assert (row["nodes"], row["mode"], row["binders"]) == (bench.QUICK.nodes, "names", 16)
        assert row["pods"] == bench.QUICK.pods
        assert row["cycles_per_s"] > 0
        assert (row["runs"], row["cycles_per_s_runs"]) == (1, [row["cycles_per_s"]])
        assert row["cpu_gauge_ms"] > 0
        assert 0 < row["median_ms"] <= row["p99_ms"]
        # Every bind went through a store transaction, some sharing one.
        assert row["binds_per_transaction"] >= 1
        assert 0 <= row["refused"] < row["pods"]
        assert row["client_cpu_ms_per_cycle"] > 0
        # The extender's own timing of each verb. Filter and prioritize run one pod at a
        # time, so together they fit in the wall time a cycle takes.
        assert all(row[f"server_{verb}_ms"] > 0 for verb in bench.VERBS), row
        scoring_ms = row["server_filter_ms"] + row["server_prioritize_ms"]
        assert scoring_ms < 1000.0 / row["cycles_per_s"], row
        if CPU_FIELDS:
            assert row["apiserver_cpu_ms_per_cycle"] > 0
            assert row["extender_cpu_ms_per_cycle"] > 0
            assert row["extender_bound_cycles_per_s"] == pytest.approx(
                1000 / row["extender_cpu_ms_per_cycle"], rel=0.01
            )
            # Every cycle's requests wake the event loop at least once.
            assert 0 <= row["extender_kernel_share"] <= 1
            assert row["extender_switches_per_cycle"] >= 1


def test_binders_and_repeats_must_be_at_least_one() -> None:
    assert bench.parse(["--binders", "1", "16"]).binders == [1, 16]
    assert bench.parse(["--repeat", "3"]).repeat == 3
    with pytest.raises(SystemExit):
        bench.parse(["--binders", "0"])
    with pytest.raises(SystemExit):
        bench.parse(["--repeat", "0"])


def test_repeated_runs_make_one_row_of_medians() -> None:
    fixed = {"case": "c", "store": "sqlite", "nodes": 10, "mode": "names", "binders": 16}
    runs = [
        {**fixed, "pods": 40, "cycles_per_s": 150.0, "p99_ms": 9.0, "refused": 1},
        {**fixed, "pods": 40, "cycles_per_s": 210.0, "p99_ms": 5.0, "refused": 0},
        {**fixed, "pods": 40, "cycles_per_s": 180.0, "p99_ms": 7.0, "refused": 2},
    ]
    assert bench.summarise(runs) == {
        **fixed,
        "pods": 40,
        "cycles_per_s": 180.0,
        "p99_ms": 7.0,
        "refused": 3,
        "runs": 3,
        "cycles_per_s_runs": [150.0, 210.0, 180.0],
    }


def test_best_host_takes_the_highest_score_and_the_first_name_on_ties() -> None:
    scores = [
        bench.HostPriority("node-c", 7),
        bench.HostPriority("node-b", 9),
        bench.HostPriority("node-a", 3),
        bench.HostPriority("node-d", 9),
    ]
    names = ["node-a", "node-b", "node-c", "node-d", "node-e"]
    assert bench.best_host(names, scores) == "node-b"
    # The extender leaves out the hosts it scores 0: none listed, the first name wins.
    assert bench.best_host(names, []) == "node-a"


def test_api_server_process_serves_its_seed_until_stopped() -> None:
    api = ApiServerProcess.start(nodes=[node_json("n1")], pods=[pod_json("p1")])
    try:
        core = k8s.CoreV1Api(k8s.ApiClient(k8s.Configuration(host=api.url)))
        assert [n.to_dict()["metadata"]["name"] for n in core.list_node().items] == ["n1"]
        assert core.read_namespaced_pod("p1", "default").to_dict()["metadata"]["uid"] == "uid-p1"
        assert [p["metadata"]["name"] for p in api.pods()] == ["p1"]
    finally:
        api.stop()
    assert api.process.returncode == 0


def test_check_bound_names_every_pod_not_bound_as_answered() -> None:
    allocated = {bench.ALLOCATED: "GPU-n1-0,NVIDIA,8000,10:;"}
    pods = [
        pod_json("bound", node="n1", annotations=allocated),
        pod_json("elsewhere", node="n2", annotations=allocated),
        pod_json("unannotated", node="n1"),
        pod_json("pending"),
    ]
    with ApiServerProcess.start(pods=pods) as api:
        bench.check_bound(api, {"bound": "n1"})
        with pytest.raises(RuntimeError, match="3 of 4 pods") as failure:
            bench.check_bound(
                api, {"bound": "n1", "elsewhere": "n1", "unannotated": "n1", "pending": "n1"}
            )
    for name in ("elsewhere", "unannotated", "pending"):
        assert name in str(failure.value)


def test_a_failed_bind_fails_the_run(tmp_path: Path) -> None:
    # The pod is not on the API server, so the extender cannot annotate or bind it.
    pod = pod_json("ghost", mem=8000, cores=10)
    with ApiServerProcess.start(nodes=[node_json("n1")]) as api:
        extender = spawn_extender(
            env={
                "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'extender.db'}",
                "VGPU_KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.url)),
            },
            log=tmp_path / "extender.log",
        )
        try:
            bench.wait_for_nodes(extender.url, pod, ["n1"])
            with pytest.raises(RuntimeError, match=r"bind of ghost failed: .*not found"):
                bench.schedule(extender.url, [pod], ["n1"], binders=2)
        finally:
            extender.stop()


def test_verb_means_are_the_run_s_own_calls() -> None:
    before = bench.Scrape(requests={"filter": 10.0, "bind": 4.0}, seconds={"filter": 0.5})
    after = bench.Scrape(
        requests={"filter": 30.0, "bind": 4.0, "prioritize": 5.0},
        seconds={"filter": 0.54, "bind": 1.0, "prioritize": 0.005},
    )
    # 20 filters took 40 ms; no bind in the run; 5 prioritizes 5 ms.
    assert bench.verb_means_ms(before, after) == {"filter": 2.0, "prioritize": 1.0}


def test_context_switches_are_summed_from_both_fields_of_a_thread(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(
        "Name:\tpython\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t5\n"
    )
    assert bench._switches(status) == 12
    assert bench._switches(tmp_path / "ended") == 0  # a thread gone between readings


def test_a_reading_since_an_earlier_one_is_the_difference() -> None:
    later = bench.CpuReading(cpu_s=3.0, kernel_s=1.25, switches=10)
    assert later.since(bench.CpuReading(cpu_s=1.0, kernel_s=0.5, switches=4)) == (
        bench.CpuReading(cpu_s=2.0, kernel_s=0.75, switches=6)
    )
