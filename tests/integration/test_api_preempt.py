"""preempt over real HTTP: per node the fewest victims that make the pod fit.

demo-t4-1 has two T4 (15360 MiB each). Four victims of 7000 MiB fill it two per GPU
(1360 MiB left on each); the preemptor wants one GPU with 7000 MiB, so exactly one
victim must go, and which one depends on priorities.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import (
    RunningExtender,
    args,
    place,
    pod_json,
    standalone_settings,
    start_extender,
)

VICTIMS = [pod_json(f"v{i}", mem=7000) for i in range(4)]
PREEMPTOR = pod_json("urgent", mem=7000, priority=1000)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """Preempt changes nothing, so one filled extender serves every test here."""
    running = start_extender(standalone_settings(tmp_path_factory.mktemp("pre"), demo=True))
    for pod in VICTIMS:
        place(running, pod, "demo-t4-1")
    yield running
    running.stop()


def _meta(node_victims: dict[str, list[str]]) -> dict[str, Any]:
    return {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
        for node, uids in node_victims.items()
    }


def _uids(answer: dict[str, Any]) -> dict[str, list[str]]:
    return {
        node: [pod["UID"] for pod in entry["Pods"]]
        for node, entry in answer["NodeNameToMetaVictims"].items()
    }


UIDS = [p["metadata"]["uid"] for p in VICTIMS]


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        # What kube-scheduler sends when only the GPU is short: no victim at all. The
        # extender chooses: all four have priority 0 and free one GPU each, so the most
        # recently started (placed last) goes.
        ({"demo-t4-1": []}, {"demo-t4-1": [UIDS[3]]}),
        # The order kube-scheduler listed them in does not decide; the same rule does.
        ({"demo-t4-1": UIDS}, {"demo-t4-1": [UIDS[3]]}),
        ({"demo-t4-1": list(reversed(UIDS))}, {"demo-t4-1": [UIDS[3]]}),
        # A node with free room keeps kube-scheduler's own victims ...
        ({"demo-t4-2": ["other-pod"]}, {"demo-t4-2": ["other-pod"]}),
        # ... but is dropped when it proposed none (an empty list is an error to it).
        ({"demo-t4-2": []}, {}),
        ({"no-such-node": UIDS}, {}),
        # A proposed victim holding no device stays (kube-scheduler needs it for what
        # it accounts for itself), after the GPU holder, the more important one.
        ({"demo-t4-1": ["holds-no-gpu"]}, {"demo-t4-1": [UIDS[3], "holds-no-gpu"]}),
    ],
    ids=[
        "none-proposed",
        "proposed-all",
        "proposed-reversed",
        "room-already",
        "room-none-proposed",
        "unknown-node",
        "non-holder-kept",
    ],
)
def test_meta_victims(
    filled: RunningExtender, candidates: dict[str, list[str]], expected: dict[str, list[str]]
) -> None:
    running = filled
    answer = running.verb(
        "/preempt",
        {"Pod": PREEMPTOR, "NodeNameToVictims": None, "NodeNameToMetaVictims": _meta(candidates)},
    )
    assert _uids(answer) == expected
    assert "NodeNameToVictims" not in answer  # names mode: UIDs only
    # Preempt is advice: nothing is released until the pods are really gone.
    assert len(running.runtime.cluster.index.pods_on("demo-t4-1")) == len(VICTIMS)


def test_only_pods_of_lower_priority_are_victims(filled: RunningExtender) -> None:
    running = filled
    same = pod_json("peer", mem=7000, priority=0)  # as important as every victim
    answer = running.verb(
        "/preempt", {"Pod": same, "NodeNameToMetaVictims": _meta({"demo-t4-1": []})}
    )
    assert answer == {"NodeNameToMetaVictims": {}}


def test_full_victim_pods_are_ranked_by_their_priority(filled: RunningExtender) -> None:
    running = filled
    priorities = [5, 1, 3, 10]
    victims = [
        {**pod, "spec": {**pod["spec"], "priority": p}}
        for pod, p in zip(VICTIMS, priorities, strict=True)
    ]
    answer = running.verb(
        "/preempt",
        {
            "Pod": PREEMPTOR,
            "NodeNameToVictims": {"demo-t4-1": {"Pods": victims, "NumPDBViolations": 1}},
            "NodeNameToMetaVictims": None,
        },
    )
    assert answer["NodeNameToMetaVictims"] == {
        "demo-t4-1": {"Pods": [{"UID": UIDS[1]}], "NumPDBViolations": 1}
    }
    # Victims received as pods go back as pods too, as received.
    assert answer["NodeNameToVictims"] == {
        "demo-t4-1": {"Pods": [victims[1]], "NumPDBViolations": 1}
    }


def test_full_pods_mode_with_no_victims_names_pods_it_chose(filled: RunningExtender) -> None:
    running = filled
    answer = running.verb(
        "/preempt",
        {
            "Pod": PREEMPTOR,
            "NodeNameToVictims": {"demo-t4-1": {"Pods": [], "NumPDBViolations": 0}},
            "NodeNameToMetaVictims": None,
        },
    )
    assert _uids(answer) == {"demo-t4-1": [UIDS[3]]}
    # Standalone, the store knows the pod by name: that is the pod object sent.
    assert answer["NodeNameToVictims"]["demo-t4-1"]["Pods"] == [
        {"metadata": {"name": "v3", "namespace": "default", "uid": UIDS[3]}}
    ]


def test_the_smallest_set_can_take_several_victims(filled: RunningExtender) -> None:
    running = filled
    big = pod_json("bigger", mem=14000)  # needs one GPU emptied: both its victims
    answer = running.verb(
        "/preempt",
        {
            "Pod": big,
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": _meta({"demo-t4-1": UIDS}),
        },
    )
    chosen = _uids(answer)["demo-t4-1"]
    assert len(chosen) == 2
    devices = {
        running.runtime.cluster.index.allocation(uid).assignment.device_uuids  # type: ignore[union-attr]
        for uid in chosen
    }
    assert len(devices) == 1  # both on the same GPU: freeing it is what makes room


def test_no_subset_helps_a_pod_bigger_than_any_device(filled: RunningExtender) -> None:
    running = filled
    answer = running.verb(
        "/preempt",
        {
            "Pod": pod_json("giant", mem=20_000),
            "NodeNameToMetaVictims": _meta({"demo-t4-1": UIDS}),
        },
    )
    assert answer == {"NodeNameToMetaVictims": {}}


def test_a_pod_without_devices_keeps_the_proposed_victims(filled: RunningExtender) -> None:
    running = filled
    answer = running.verb(
        "/preempt",
        {
            "pod": pod_json("cpu", gpus=None),
            "nodenametometavictims": _meta({"demo-t4-1": UIDS[:2], "demo-t4-2": []}),
        },
    )
    assert _uids(answer) == {"demo-t4-1": UIDS[:2]}


def test_a_gpu_only_conflict_names_the_holder(tmp_path: Path) -> None:
    """The issue's reproduction: kube-scheduler proposes no victim; the extender finds
    the priority-0 pod that holds the only GPU."""
    inventory = tmp_path / "inventory.json"
    device = {"id": "GPU-n1-0", "count": 10, "devmem": 23028, "devcore": 100, "health": True}
    inventory.write_text(
        json.dumps({"nodes": [{"name": "n1", "devices": [{**device, "type": "NVIDIA-A10"}]}]})
    )
    running = start_extender(standalone_settings(tmp_path, inventory_file=inventory))
    try:
        low = pod_json("low", mem=20_000, priority=0)
        place(running, low, "n1")
        high = pod_json("high", mem=20_000, priority=1000)
        assert running.verb("/filter", args(high, ["n1"]))["NodeNames"] == []
        answer = running.verb(
            "/preempt",
            {
                "Pod": high,
                "NodeNameToVictims": None,
                "NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 0}},
            },
        )
        assert answer == {
            "NodeNameToMetaVictims": {
                "n1": {"Pods": [{"UID": low["metadata"]["uid"]}], "NumPDBViolations": 0}
            }
        }
    finally:
        running.stop()
