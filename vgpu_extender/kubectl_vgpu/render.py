"""Text for the terminal from the admin API's JSON (plain dicts, as it sent them).

Tables are kubectl-like: upper-case headers, columns two spaces apart, no borders, so
they read well in a terminal and survive ``grep`` and ``awk``. ``-o json`` and ``-o
yaml`` print the admin API's objects unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Json = dict[str, Any]

NODE_HEADERS = ("NODE", "GPU", "TYPE", "MEMORY(MiB)", "CORES(%)", "PODS/SLOTS", "STATE", "PODS")
TOP_HEADERS = (
    "NODE",
    "FREE(MiB)",
    "USED/TOTAL(MiB)",
    "MEMORY%",
    "CORES FREE(%)",
    "GPUS",
    "FRAGMENTATION",
    "PODS",
    "STATE",
)


def dump(data: Any, output: str) -> str:
    """``json`` or ``yaml``, keys in the API's order."""
    if output == "yaml":
        import yaml

        text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        return text.rstrip("\n")
    return json.dumps(data, indent=2, ensure_ascii=False)


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell; the last one is left ragged."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def percent(part: float, whole: float) -> str:
    return f"{round(100 * part / whole)}%" if whole else "0%"


def device_state(device: Mapping[str, Any]) -> str:
    words = [
        word
        for word, on in (("unhealthy", not device["healthy"]), ("cordoned", device["cordoned"]))
        if on
    ]
    return ",".join(words) or "ok"


def _pods_of(device: Mapping[str, Any]) -> str:
    return ",".join(f"{p['namespace']}/{p['name']}" for p in device["pods"]) or "-"


# --------------------------------------------------------------------------- inspect
def nodes_table(nodes: Sequence[Json]) -> str:
    """One line per GPU, grouped by node, then the cluster's totals."""
    rows: list[tuple[str, ...]] = [NODE_HEADERS]
    for node in nodes:
        devices = node.get("devices") or []
        if not devices:
            rows.append((node["name"], "-", "-", "-", "-", "-", "no GPUs", "-"))
        for position, d in enumerate(devices):
            rows.append(
                (
                    node["name"] if position == 0 else "",
                    str(d["index"]),
                    d["type"],
                    f"{d['memory_used_mib']}/{d['memory_mib']}",
                    f"{d['cores_used']}/{d['cores']}",
                    f"{d['slots_used']}/{d['slots']}",
                    device_state(d),
                    _pods_of(d),
                )
            )
    lines = table(rows)
    lines.append("")
    lines.extend(_totals(nodes))
    return "\n".join(lines)


def _totals(nodes: Sequence[Json]) -> list[str]:
    used = sum(n["memory_used_mib"] for n in nodes)
    total = sum(n["memory_mib"] for n in nodes)
    cores_used = sum(n["cores_used"] for n in nodes)
    cores = sum(n["cores"] for n in nodes)
    schedulable = [
        d for n in nodes for d in n.get("devices") or [] if d["healthy"] and not d["cordoned"]
    ]
    free = sum(d["memory_free_mib"] for d in schedulable)
    fragment = sum(d["fragment_mib"] for d in schedulable)
    lines = [
        f"Allocated/Total GPU memory: {used}/{total} MiB ({percent(used, total)}), "
        f"cores: {cores_used}/{cores} ({percent(cores_used, cores)}), "
        f"GPUs: {sum(n['gpus'] for n in nodes)} on {len(nodes)} node(s)",
        f"Free memory on shared or full GPUs (fragmentation): {fragment}/{free} MiB "
        f"({percent(fragment, free)})",
    ]
    lines.extend(f"Not schedulable: {n['name']}: {n['problem']}" for n in nodes if n["problem"])
    return lines


def node_detail(node: Json) -> str:
    """One node: its figures, a line per GPU, and a line per pod and GPU it holds."""
    devices = node.get("devices") or []
    lines = [
        f"Node:           {node['name']}",
        f"State:          {node['problem'] or 'schedulable'}",
        f"GPUs:           {node['gpus']} ({node['healthy_gpus']} healthy, "
        f"{node['cordoned_gpus']} cordoned)",
        f"Memory (MiB):   {node['memory_used_mib']}/{node['memory_mib']} used "
        f"({percent(node['memory_used_mib'], node['memory_mib'])}), "
        f"{node['memory_free_mib']} free",
        f"Cores (%):      {node['cores_used']}/{node['cores']} used, {node['cores_free']} free",
        f"Fragmentation:  {round(100 * node['fragmentation'])}% of the free memory",
        f"Pods:           {node['allocations']}",
    ]
    if node.get("labels"):
        labels = ",".join(f"{k}={v}" for k, v in sorted(node["labels"].items()))
        lines.append(f"Labels:         {labels}")
    lines.append("")
    rows: list[tuple[str, ...]] = [
        ("GPU", "UUID", "TYPE", "NUMA", "MEMORY(MiB)", "CORES(%)", "PODS/SLOTS", "STATE")
    ]
    rows.extend(
        (
            str(d["index"]),
            d["uuid"],
            d["type"],
            str(d["numa"]),
            f"{d['memory_used_mib']}/{d['memory_mib']}",
            f"{d['cores_used']}/{d['cores']}",
            f"{d['slots_used']}/{d['slots']}",
            device_state(d),
        )
        for d in devices
    )
    lines.extend(table(rows) if devices else ["No GPUs."])
    pods: list[tuple[str, ...]] = [("POD", "GPU", "STATE", "MEMORY(MiB)", "CORES(%)", "CONTAINERS")]
    pods.extend(
        (
            f"{p['namespace']}/{p['name']}",
            str(d["index"]),
            p["state"],
            str(p["memory_mib"]),
            str(p["cores"]),
            ",".join(str(c) for c in p["containers"]),
        )
        for d in devices
        for p in d["pods"]
    )
    lines.append("")
    lines.extend(table(pods) if len(pods) > 1 else ["No pods hold its GPUs."])
    return "\n".join(lines)


# --------------------------------------------------------------------------- top
def by_free_memory(nodes: Sequence[Json]) -> list[Json]:
    """Most free memory first; nodes that take no pod last; ties by name."""
    return sorted(nodes, key=lambda n: (bool(n["problem"]), -n["memory_free_mib"], n["name"]))


def top_table(nodes: Sequence[Json], summary: Json | None) -> str:
    """One line per node, in the order given, then the cluster's figures."""
    rows: list[tuple[str, ...]] = [TOP_HEADERS]
    rows.extend(
        (
            n["name"],
            str(n["memory_free_mib"]),
            f"{n['memory_used_mib']}/{n['memory_mib']}",
            percent(n["memory_used_mib"], n["memory_mib"]),
            f"{n['cores_free']}/{n['cores']}",
            f"{n['healthy_gpus']}/{n['gpus']}",
            f"{round(100 * n['fragmentation'])}%",
            str(n["allocations"]),
            n["problem"] or "ok",
        )
        for n in nodes
    )
    lines = table(rows)
    if summary is not None:
        s = summary
        lines += [
            "",
            f"Cluster: {s['memory_free_mib']} MiB free of {s['memory_mib']} "
            f"({round(100 * s['memory_utilisation'])}% used), cores "
            f"{round(100 * s['cores_utilisation'])}% used, fragmentation "
            f"{round(100 * s['fragmentation'])}%, {s['pods']} pod(s) on {s['gpus']} GPU(s) "
            f"({s['unhealthy_gpus']} unhealthy, {s['cordoned_gpus']} cordoned)",
        ]
        if s["pending_reservations"] or s["conflicts"]:
            lines.append(
                f"Pending reservations: {s['pending_reservations']}, "
                f"conflicts: {s['conflicts']} (see the admin API's /api/v1/conflicts)"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- whatif
def whatif_text(pod: str, result: Json) -> str:
    """Where the pod would go and with which GPUs, then why every other node would not."""
    feasible: list[Json] = result["feasible"]
    rejected: dict[str, Json] = result["rejected"]
    if not result["managed"]:
        return (
            f"Pod {pod} asks for no GPU resource the extender manages: kube-scheduler places "
            f"it without the extender ({len(feasible)} node(s) pass)."
        )
    lines: list[str] = []
    if feasible:
        best = feasible[0]
        lines.append(f"Pod {pod} would go to {best['node']} (score {best['score']}/10).")
        for index, grants in enumerate(best.get("containers") or []):
            devices = ", ".join(
                f"{g['uuid']} ({g['memory_mib']} MiB, {g['cores']}% cores)" for g in grants
            )
            lines.append(f"  container {index}: {devices or 'no GPU'}")
        others = [f"{p['node']} (score {p['score']})" for p in feasible[1:]]
        if others:
            lines.append(f"It would also fit on: {', '.join(others)}.")
    else:
        lines.append(f"Pod {pod} fits on no node.")
    if rejected:
        lines.append("")
        rows: list[tuple[str, ...]] = [("NODE", "REASON", "PREEMPTION", "MESSAGE")]
        rows.extend(
            (
                node,
                why["reason"],
                "cannot help" if why["unresolvable"] else "may help",
                why["message"],
            )
            for node, why in sorted(rejected.items())
        )
        lines.extend(table(rows))
    return "\n".join(lines)
