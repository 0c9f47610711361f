"""HAMi's ``hami.io/gpu-scheduler-policy: mutex`` through the real app over HTTP: a pod
asking it is given only GPUs no one uses, at filter and at bind, and is refused with the
words of the conflict where the node has too few.

Demo node demo-t4-1: two T4s (15360 MiB each).
"""

from __future__ import annotations

from tests.support.server import StartExtender, args, bind_args, place, pod_json

NODE = "demo-t4-1"
MUTEX = {"hami.io/gpu-scheduler-policy": "spread,mutex"}


def test_a_mutex_pod_takes_only_an_unused_gpu(extender: StartExtender) -> None:
    running = extender(demo=True)
    busy = pod_json("busy", mem=1000, cores=10)
    place(running, busy, NODE)
    (taken,) = {row.device_uuid for row in running.live_rows(busy["metadata"]["uid"])}

    both = pod_json("both", gpus=2, mem=1000, cores=10, annotations=MUTEX)
    answer = running.verb("/filter", args(both, [NODE]))
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"][NODE].startswith("exclusive gpu conflict")
    refused = running.verb("/bind", bind_args(both, NODE))["Error"]
    assert "exclusive gpu conflict" in refused

    # Without the policy the same pod shares the busy GPU.
    shared = pod_json("shared", gpus=2, mem=1000, cores=10)
    assert running.verb("/filter", args(shared, [NODE]))["NodeNames"] == [NODE]

    alone = pod_json("alone", mem=1000, cores=10, annotations=MUTEX)
    place(running, alone, NODE)
    (given,) = {row.device_uuid for row in running.live_rows(alone["metadata"]["uid"])}
    assert given != taken
