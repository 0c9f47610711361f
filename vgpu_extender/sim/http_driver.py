"""Replay a trace against a running extender, as kube-scheduler would call it.

Per pod: kube-scheduler's own NodeResourcesFit (host CPU and memory, tracked here, since
the extender does not see them), then ``filter`` with ``NodeNames`` (``nodeCacheCapable``),
then ``prioritize`` when more than one node is left, combined with kube-scheduler's
arithmetic (``Score x weight x 10``; the extender is the only scorer, as the policy was the
only score plugin in the paper), then ``bind``. Ties go to the smallest tie-break rank.

Pods that ask for no GPU never reach the extender (kube-scheduler skips an extender that
manages resources the pod does not ask for): they go to the first node by rank that has
the CPU and memory.

The extender must know the trace's nodes: start it with the inventory that
``simulate --write-inventory`` writes (``serve --inventory FILE``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from vgpu_extender.domain import Device
from vgpu_extender.sim.mapping import node_inventory, pod_manifest
from vgpu_extender.sim.replay import ReplayResult, Workload

#: kube-scheduler: MaxNodeScore / MaxExtenderPriority.
SCORE_SCALE = 10


class ExtenderError(RuntimeError):
    """The extender answered a verb with an error or with something unreadable."""


class ExtenderClient:
    """The four verbs as kube-scheduler sends them (POST, JSON, exact 200 required)."""

    def __init__(self, client: httpx.Client, url: str = "") -> None:
        self._client = client
        self._prefix = url.rstrip("/")

    def _post(self, verb: str, body: dict[str, Any]) -> Any:
        response = self._client.post(f"{self._prefix}/{verb}", json=body)
        if response.status_code != 200:
            raise ExtenderError(f"{verb}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError:
            raise ExtenderError(f"{verb}: not JSON: {response.text[:200]!r}") from None

    def filter(self, pod: dict[str, Any], names: list[str]) -> list[str]:
        reply = self._post("filter", {"Pod": pod, "Nodes": None, "NodeNames": names})
        if reply.get("Error"):
            raise ExtenderError(f"filter: {reply['Error']}")
        feasible = reply.get("NodeNames") or []
        unknown = set(feasible) - set(names)
        if unknown:  # kube-scheduler fails the whole call on this
            raise ExtenderError(f"filter: claims nodes not in the input: {sorted(unknown)[:3]}")
        return list(feasible)

    def prioritize(self, pod: dict[str, Any], names: list[str]) -> dict[str, int]:
        reply = self._post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": names})
        scores: dict[str, int] = {}
        for item in reply or []:
            host, score = item.get("Host"), item.get("Score")
            if not isinstance(score, int) or isinstance(score, bool):
                raise ExtenderError(f"prioritize: score of {host!r} is not an integer: {score!r}")
            scores[host] = scores.get(host, 0) + score
        return scores

    def bind(self, pod: dict[str, Any], node: str) -> str:
        meta = pod["metadata"]
        reply = self._post(
            "bind",
            {
                "PodName": meta["name"],
                "PodNamespace": meta["namespace"],
                "PodUID": meta["uid"],
                "Node": node,
            },
        )
        return str(reply.get("Error") or "")


def replay_http(
    workload: Workload,
    extender: ExtenderClient,
    *,
    policy: str = "extender",
    weight: int = 1,
    on_arrival: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Drive the extender through the workload; the counters are as in ``replay``."""
    started = time.perf_counter()
    nodes = workload.nodes_by_rank()
    order = [n.name for n in nodes]
    cpu = {n.name: n.cpu_milli for n in nodes}
    memory = {n.name: n.memory_mib for n in nodes}
    result = ReplayResult(policy, workload.gpus)
    arrived = used = 0
    for position, row in enumerate(workload.order):
        pod = workload.pods[row]
        arrived += pod.gpu_request
        fits = [n for n in order if cpu[n] >= pod.cpu_milli and memory[n] >= pod.memory_mib]
        node = _place(extender, pod_manifest(pod, f"{position}-{pod.name}"), fits, weight)
        if node is None:
            result.failed += 1
        else:
            cpu[node] -= pod.cpu_milli
            memory[node] -= pod.memory_mib
            used += pod.gpu_request
            result.placed += 1
        result.arrived.append(arrived)
        result.used.append(used)
        if on_arrival is not None:
            on_arrival(position + 1)
    result.seconds = time.perf_counter() - started
    return result


def _place(
    extender: ExtenderClient, pod: dict[str, Any], fits: list[str], weight: int
) -> str | None:
    if not fits:
        return None
    wants_gpu = bool(pod["spec"]["containers"][0]["resources"]["limits"])
    if not wants_gpu:
        return fits[0]
    feasible = extender.filter(pod, fits)
    if not feasible:
        return None
    if len(feasible) > 1:  # kube-scheduler does not prioritize a lone node
        scores = extender.prioritize(pod, feasible)
        totals = [scores.get(name, 0) * weight * SCORE_SCALE for name in feasible]
        best = max(totals)
        feasible = [name for name, total in zip(feasible, totals, strict=True) if total == best]
    node = feasible[0]  # input order is rank order: ties go to the smallest rank
    error = extender.bind(pod, node)
    return None if error else node


def inventory_document(
    workload: Workload, encode: Callable[[Iterable[Device]], str]
) -> dict[str, Any]:
    """The trace's nodes as an inventory file for ``serve --inventory`` (devices in the
    vendor's registration JSON)."""
    nodes = []
    for node in workload.nodes_by_rank():
        inventory = node_inventory(node)
        nodes.append(
            {
                "name": inventory.name,
                "labels": dict(inventory.labels),
                "devices": json.loads(encode(inventory.devices)),
            }
        )
    return {"nodes": nodes}


def write_inventory(
    workload: Workload, path: Path, encode: Callable[[Iterable[Device]], str]
) -> None:
    path.write_text(json.dumps(inventory_document(workload, encode)) + "\n", encoding="utf-8")
