"""One page of a list decoded: a plain ``msgspec.json.decode`` against ``decode_page``,
whole and paced.

The real client reads the cluster a page of ``LIST_PAGE`` objects at a time, and a
page's decode is one call the interpreter cannot cut short: while it runs, a filter
waits (``reconcile_latency``). ``decode_page`` (``vgpu_extender.kube.list_page``)
decodes into the fields of a Pod or Node and of its ObjectMeta, skipping
``managedFields``; this benchmark times both on the pods ``reconcile_latency`` lists
(bound pods with HAMi's annotations), on the same pods carrying the managedFields a
real API server sends (kubelet's status and kube-scheduler's annotations, as ``kubectl
get -o json --show-managed-fields`` shows them) and on its nodes (eight GPUs each in
the device plugin's registration), and checks that every decode gives the same objects
less those. The periodic reconcile decodes with ``pace`` (an item at a time, its pacer
ticked after each): "paced" is that decode with a pace that does nothing, and "longest
step" the longest stretch of it between two calls of ``pace`` (the page's split into
items, or one item), the most a filter waits for it. Rows: page bytes, median and p99
ms per page, the ratio plain / whole, the paced median and its longest step.

Run: ``python -m benchmarks.list_decode [--json PATH] [--quick]``.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # ``python benchmarks/X.py``: import from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import argument_parser, measure, median, percentile, print_table, write_json
from benchmarks.reconcile_latency import cluster_objects
from vgpu_extender.kube.list_page import decode_page
from vgpu_extender.kube.real import LIST_PAGE

#: Nodes of the cluster the pods come from (half its GPUs busy: pods enough for a page).
NODES = 200
REPEAT, QUICK_REPEAT = 300, 20


def managed_fields(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """What a real API server records for a bound, running pod: kubelet's status fields
    and the scheduler's annotations and binding."""
    conditions = {
        f'k:{{"type":"{kind}"}}': {".": {}, "f:lastProbeTime": {}, "f:status": {}, "f:type": {}}
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    }
    annotations = {f"f:{key}": {} for key in pod["metadata"]["annotations"]}
    return [
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, **annotations}}},
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": conditions,
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {".": {}, 'k:{"ip":"10.0.0.1"}': {".": {}, "f:ip": {}}},
                    "f:startTime": {},
                }
            },
            "subresource": "status",
        },
    ]


def pages() -> dict[str, tuple[list[dict[str, Any]], bytes]]:
    """The kept objects and the page's JSON, per case."""
    cluster = cluster_objects(NODES)
    pods, nodes = cluster.pods[:LIST_PAGE], cluster.nodes[:LIST_PAGE]
    if len(pods) < LIST_PAGE:
        raise RuntimeError(f"{NODES} nodes give {len(pods)} pods, fewer than a page")
    meta = {"resourceVersion": "7", "continue": "next"}
    managed = copy.deepcopy(pods)
    for pod in managed:
        pod["metadata"]["managedFields"] = managed_fields(pod)
    return {
        "pods": (pods, msgspec.json.encode({"items": pods, "metadata": meta})),
        "pods with managedFields": (
            pods,
            msgspec.json.encode({"items": managed, "metadata": meta}),
        ),
        "nodes": (nodes, msgspec.json.encode({"items": nodes, "metadata": meta})),
    }


class Steps:
    """A pace that records the longest stretch between two of its calls."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.longest = 0.0

    def __call__(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now


def longest_step_ms(body: bytes, repeat: int) -> float:
    """The median over ``repeat`` paced decodes of each one's longest step."""
    longest: list[float] = []
    for _ in range(repeat):
        steps = Steps()
        decode_page(body, "list", pace=steps)
        longest.append(steps.longest * 1000.0)
    return median(longest)


def run(repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for case, (kept, body) in pages().items():
        for pace in (None, Steps()):
            if decode_page(body, "list", pace=pace)["items"] != kept:
                raise RuntimeError(f"{case}: decode_page did not give the objects as kept")
        plain = measure(lambda _i, body=body: msgspec.json.decode(body), repeat=repeat)
        slim = measure(lambda _i, body=body: decode_page(body, "list"), repeat=repeat)
        paced = measure(
            lambda _i, body=body: decode_page(body, "list", pace=_no_pace), repeat=repeat
        )
        rows.append(
            {
                "case": case,
                "objects": len(kept),
                "page_bytes": len(body),
                "plain_median_ms": round(median(plain), 3),
                "plain_p99_ms": round(percentile(plain, 99.0), 3),
                "decode_page_median_ms": round(median(slim), 3),
                "decode_page_p99_ms": round(percentile(slim, 99.0), 3),
                "speedup": round(median(plain) / median(slim), 2),
                "paced_median_ms": round(median(paced), 3),
                "paced_longest_step_ms": round(longest_step_ms(body, repeat), 4),
            }
        )
    return rows


def _no_pace() -> None:
    pass


def main(argv: list[str] | None = None) -> int:
    options = argument_parser(__doc__.splitlines()[0]).parse_args(argv)
    rows = run(QUICK_REPEAT if options.quick else REPEAT)
    print_table(
        f"one page of {LIST_PAGE} objects decoded",
        (
            "case",
            "bytes",
            "plain median ms",
            "plain p99 ms",
            "decode_page median ms",
            "decode_page p99 ms",
            "plain / decode_page",
            "paced median ms",
            "paced longest step ms",
        ),
        [
            (
                r["case"],
                r["page_bytes"],
                r["plain_median_ms"],
                r["plain_p99_ms"],
                r["decode_page_median_ms"],
                r["decode_page_p99_ms"],
                r["speedup"],
                r["paced_median_ms"],
                r["paced_longest_step_ms"],
            )
            for r in rows
        ],
    )
    write_json(options.json, "list_decode", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
