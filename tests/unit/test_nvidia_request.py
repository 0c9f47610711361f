"""Reading a Pod into a PodRequest with HAMi's NVIDIA rules (spec/hami.md sections 1-2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor

NVIDIA = NvidiaVendor()


def ctr(
    name: str = "main",
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "x", "resources": resources, **extra}


def pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    annotations: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u-1"}
    if annotations is not None:
        metadata["annotations"] = annotations
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": body}


def gpu(**values: Any) -> dict[str, Any]:
    names = {
        "count": "nvidia.com/gpu",
        "mem": "nvidia.com/gpumem",
        "pct": "nvidia.com/gpumem-percentage",
        "cores": "nvidia.com/gpucores",
        "prio": "nvidia.com/priority",
    }
    return {names[key]: value for key, value in values.items()}


# -- the captured pods ---------------------------------------------------------------

EXCLUSIVE = dict(memory_percent=100, cores=100)
FIXTURE_PODS: dict[str, dict[str, Any]] = {
    "cpu-only": dict(
        containers=(ContainerRequest("nginx"),), managed=False, cpu_milli=500, host_memory_mib=512
    ),
    "gpu-mem-percent": dict(
        containers=(ContainerRequest("jupyter", count=1, memory_percent=50),),
        cpu_milli=2000,
        host_memory_mib=8192,
    ),
    "gpu-priority-zero": dict(
        containers=(ContainerRequest("serve", count=1, memory_mib=2048, cores=25, priority=0),),
        cpu_milli=2000,
        host_memory_mib=4096,
    ),
    "gpu-a10-numa": dict(
        containers=(ContainerRequest("embedder", count=1, memory_mib=10000),),
        selector=DeviceSelector(use_types=("a10",)),
        numa_bind=True,
        cpu_milli=4000,
        host_memory_mib=12288,
    ),
    "gpu-init-container": dict(
        containers=(
            ContainerRequest("warmup", count=1, memory_mib=2000, init=True),
            ContainerRequest("trainer", count=1, memory_mib=8000, cores=50),
        ),
        cpu_milli=8000,
        host_memory_mib=32768,
    ),
    "gpu-mem-cores": dict(
        containers=(ContainerRequest("server", count=1, memory_mib=4000, cores=30),),
        cpu_milli=2000,
        host_memory_mib=16384,
    ),
    "gpu-two-containers": dict(
        containers=(
            ContainerRequest("encoder", count=1, memory_mib=3000, cores=20),
            ContainerRequest("decoder", count=1, memory_mib=5500, cores=40),
        ),
        cpu_milli=2000,
        host_memory_mib=12288,
    ),
    "gpu-two-whole": dict(
        containers=(ContainerRequest("trainer", count=2, **EXCLUSIVE),),
        cpu_milli=0,
        host_memory_mib=0,
    ),
}


def _fixture_pods(fixtures_dir: Path, name: str) -> list[dict[str, Any]]:
    pods = [yaml.safe_load((fixtures_dir / "cluster" / "pod" / f"{name}.yaml").read_text())]
    filter_body = fixtures_dir / "names" / f"filter-{name}.json"
    if filter_body.exists():  # the CPU-only pod was never sent to the extender
        pods.append(json.loads(filter_body.read_bytes())["Pod"])
    return pods


@pytest.mark.parametrize("name", sorted(FIXTURE_PODS), ids=sorted(FIXTURE_PODS))
def test_captured_pods_parse_to_the_documented_request(fixtures_dir: Path, name: str) -> None:
    expected = dict(FIXTURE_PODS[name])
    managed = expected.pop("managed", True)
    for raw in _fixture_pods(fixtures_dir, name):
        request = NVIDIA.parse_pod(raw)
        assert request.managed is managed
        assert request.uid == raw["metadata"]["uid"]
        assert (request.namespace, request.name) == (
            raw["metadata"]["namespace"],
            raw["metadata"]["name"],
        )
        assert request.priority == 0
        assert request.node_policy is None and request.device_policy is None
        for key, value in expected.items():
            assert getattr(request, key) == value, key
        if "selector" not in expected:
            assert request.selector == DeviceSelector()
        if "numa_bind" not in expected:
            assert request.numa_bind is False


def test_every_captured_filter_body_is_covered(fixtures_dir: Path) -> None:
    bodies = {
        p.name[len("filter-") : -len(".json")] for p in fixtures_dir.glob("names/filter-*.json")
    }
    assert bodies and bodies <= set(FIXTURE_PODS)


# -- HAMi's request rules ------------------------------------------------------------

RULES = [
    ("bare-count-is-whole-exclusive-card", [ctr(limits=gpu(count="1"))], {}, (1, 0, 100, 100)),
    ("two-bare-gpus", [ctr(limits=gpu(count="2"))], {}, (2, 0, 100, 100)),
    ("gpumem-alone-implies-one-gpu", [ctr(limits=gpu(mem="3k"))], {}, (1, 3000, 0, 0)),
    ("percentage-alone-implies-one-gpu", [ctr(limits=gpu(pct="50"))], {}, (1, 0, 50, 0)),
    ("percentage-100-is-exclusive", [ctr(limits=gpu(count="1", pct="100"))], {}, (1, 0, 100, 100)),
    ("cores-alone-implies-one-whole-memory", [ctr(limits=gpu(cores="30"))], {}, (1, 0, 100, 30)),
    (
        "gpumem-wins-over-percentage",
        [ctr(limits=gpu(count="1", mem="1000", pct="50"))],
        {},
        (1, 1000, 0, 0),
    ),
    (
        "gpumem-with-percentage-100-is-exclusive",
        [ctr(limits=gpu(count="1", mem="1000", pct="100"))],
        {},
        (1, 1000, 0, 100),
    ),
    (
        "gpumem-zero-means-whole-memory-shared",
        [ctr(limits=gpu(count="1", mem="0"))],
        {},
        (1, 0, 100, 0),
    ),
    ("percentage-zero-is-ignored", [ctr(limits=gpu(count="1", pct="0"))], {}, (1, 0, 100, 0)),
    ("explicit-cores-zero", [ctr(limits=gpu(count="1", cores="0"))], {}, (1, 0, 100, 0)),
    (
        "limits-win-over-requests",
        [ctr(limits=gpu(count="1", mem="4k"), requests=gpu(count="2", mem="2k", cores="10"))],
        {},
        (1, 4000, 0, 10),
    ),
    ("requests-only", [ctr(requests=gpu(count="1", mem="2048", cores="25"))], {}, (1, 2048, 0, 25)),
    ("integers-not-strings", [ctr(limits=gpu(count=1, mem=512, cores=5))], {}, (1, 512, 0, 5)),
    (
        "default-memory-for-bare-count",
        [ctr(limits=gpu(count="1"))],
        {"default_memory_mib": 1024},
        (1, 1024, 0, 100),
    ),
    (
        "default-memory-not-used-with-percentage",
        [ctr(limits=gpu(count="1", pct="25"))],
        {"default_memory_mib": 1024},
        (1, 0, 25, 0),
    ),
    (
        "default-cores-when-shared",
        [ctr(limits=gpu(mem="1000"))],
        {"default_cores": 10},
        (1, 1000, 0, 10),
    ),
    ("gpu-count-zero-asks-nothing", [ctr(limits=gpu(count="0"))], {}, (0, 0, 0, 0)),
    ("no-resources", [ctr()], {}, (0, 0, 0, 0)),
    ("only-cpu", [ctr(limits={"cpu": "1"})], {}, (0, 0, 0, 0)),
    (
        "renamed-resources",
        [ctr(limits={"example.com/vgpu": "1", "example.com/vmem": "4k"})],
        {"count_resource": "example.com/vgpu", "memory_resource": "example.com/vmem"},
        (1, 4000, 0, 0),
    ),
]


@pytest.mark.parametrize(
    ("containers", "settings", "expected"),
    [case[1:] for case in RULES],
    ids=[case[0] for case in RULES],
)
def test_request_rules(
    containers: list[dict[str, Any]],
    settings: dict[str, Any],
    expected: tuple[int, int, int, int],
) -> None:
    vendor = NvidiaVendor(NvidiaConfig(**settings))
    (request,) = vendor.parse_pod(pod(*containers)).containers
    count, memory, percent, cores = expected
    assert (request.count, request.memory_mib, request.memory_percent, request.cores) == (
        count,
        memory,
        percent,
        cores,
    )


PRIORITIES = [
    ("absent", gpu(count="1"), None),
    ("zero", gpu(count="1", prio="0"), 0),
    ("one", gpu(count="1", prio="1"), 1),
    ("without-devices", gpu(prio="1"), 1),
]


@pytest.mark.parametrize(
    ("limits", "expected"), [c[1:] for c in PRIORITIES], ids=[c[0] for c in PRIORITIES]
)
def test_task_priority_is_read_but_does_not_ask_for_a_device(
    limits: dict[str, Any], expected: int | None
) -> None:
    request = NVIDIA.parse_pod(pod(ctr(limits=limits)))
    assert request.containers[0].priority == expected
    assert request.managed is ("nvidia.com/gpu" in limits)


def test_init_containers_come_first_and_every_container_keeps_its_position() -> None:
    request = NVIDIA.parse_pod(
        pod(
            ctr("app-a"),
            ctr("app-b", limits=gpu(count="1", mem="1k")),
            init=(ctr("init-a", limits=gpu(count="1", mem="2k")), ctr("init-b")),
        )
    )
    assert [(c.name, c.init, c.count) for c in request.containers] == [
        ("init-a", True, 1),
        ("init-b", True, 0),
        ("app-a", False, 0),
        ("app-b", False, 1),
    ]
    assert [c.name for c in request.device_containers] == ["init-a", "app-b"]


def test_unnamed_container_is_named_by_its_position() -> None:
    request = NVIDIA.parse_pod(pod({"resources": {"limits": gpu(count="1")}}))
    assert request.containers[0].name == "spec.containers[0]"


# -- annotations ---------------------------------------------------------------------

ANNOTATIONS = [
    (
        "use-types-trimmed-lowercased",
        {"nvidia.com/use-gputype": " Tesla V100-PCIE-32GB, NVIDIA A10 ,"},
        {"selector": DeviceSelector(use_types=("tesla v100-pcie-32gb", "nvidia a10"))},
    ),
    (
        "avoid-types",
        {"nvidia.com/nouse-gputype": "A100"},
        {"selector": DeviceSelector(avoid_types=("a100",))},
    ),
    (
        "empty-type-list-is-no-constraint",
        {"nvidia.com/use-gputype": ""},
        {"selector": DeviceSelector()},
    ),
    (
        "uuids-exact-and-trimmed",
        {"nvidia.com/use-gpuuuid": "GPU-Ab, GPU-cd", "nvidia.com/nouse-gpuuuid": "GPU-EF"},
        {"selector": DeviceSelector(use_uuids=("GPU-Ab", "GPU-cd"), avoid_uuids=("GPU-EF",))},
    ),
    ("node-policy", {"hami.io/node-scheduler-policy": "Spread"}, {"node_policy": "spread"}),
    (
        "node-policy-label-priority",
        {"hami.io/node-scheduler-policy": "label-priority"},
        {"node_policy": "label-priority"},
    ),
    ("empty-node-policy", {"hami.io/node-scheduler-policy": " "}, {"node_policy": None}),
    ("gpu-policy", {"hami.io/gpu-scheduler-policy": "binpack"}, {"device_policy": "binpack"}),
    (
        "gpu-policy-chain-first-known",
        {"hami.io/gpu-scheduler-policy": "numa, spread,binpack"},
        {"device_policy": "spread"},
    ),
    (
        "gpu-policy-advisory-only",
        {"hami.io/gpu-scheduler-policy": "topology-aware"},
        {"device_policy": None},
    ),
    ("gpu-policy-mutex", {"hami.io/gpu-scheduler-policy": "mutex"}, {"device_policy": None}),
    ("unrelated-annotations", {"team": "ml"}, {"selector": DeviceSelector(), "numa_bind": False}),
]


@pytest.mark.parametrize(
    ("annotations", "expected"), [c[1:] for c in ANNOTATIONS], ids=[c[0] for c in ANNOTATIONS]
)
def test_pod_annotations(annotations: dict[str, str], expected: dict[str, Any]) -> None:
    request = NVIDIA.parse_pod(pod(ctr(limits=gpu(count="1")), annotations=annotations))
    for key, value in expected.items():
        assert getattr(request, key) == value, key


GO_BOOLS = [
    *[(text, True) for text in ("1", "t", "T", "TRUE", "true", "True")],
    *[(text, False) for text in ("0", "f", "F", "FALSE", "false", "False")],
]


@pytest.mark.parametrize(("text", "expected"), GO_BOOLS, ids=[t for t, _ in GO_BOOLS])
def test_numa_bind_uses_go_parse_bool(text: str, expected: bool) -> None:
    request = NVIDIA.parse_pod(
        pod(ctr(limits=gpu(count="1")), annotations={"nvidia.com/numa-bind": text})
    )
    assert request.numa_bind is expected


# -- pod-level fields ----------------------------------------------------------------


def test_pod_identity_priority_and_defaults() -> None:
    raw = pod(ctr(limits=gpu(count="1")), priority=1000)
    assert NVIDIA.parse_pod(raw) == PodRequest(
        uid="u-1",
        namespace="ns",
        name="p",
        containers=(ContainerRequest("main", count=1, memory_percent=100, cores=100),),
        priority=1000,
    )
    bare = {"spec": {"containers": [ctr()]}}
    request = NVIDIA.parse_pod(bare)
    assert (request.uid, request.namespace, request.name, request.priority) == (
        "",
        "default",
        "",
        0,
    )


HOST = [
    (
        "sum-of-apps",
        [
            ctr("a", requests={"cpu": "1", "memory": "1Gi"}),
            ctr("b", requests={"cpu": "500m", "memory": "512Mi"}),
        ],
        [],
        (1500, 1536),
    ),
    ("limits-when-no-requests", [ctr(limits={"cpu": "2", "memory": "1Gi"})], [], (2000, 1024)),
    ("requests-win", [ctr(limits={"cpu": "4"}, requests={"cpu": "2"})], [], (2000, 0)),
    (
        "init-peak-wins",
        [ctr(requests={"cpu": "1"})],
        [ctr("i", requests={"cpu": "3", "memory": "1Mi"})],
        (3000, 1),
    ),
    (
        "apps-win-over-init",
        [ctr(requests={"cpu": "2"})],
        [ctr("i", requests={"cpu": "1"})],
        (2000, 0),
    ),
    (
        "sidecar-adds-to-apps-and-later-inits",
        [ctr(requests={"cpu": "1"})],
        [
            ctr("side", requests={"cpu": "1"}, restartPolicy="Always"),
            ctr("i", requests={"cpu": "3"}),
        ],
        (4000, 0),
    ),
]


@pytest.mark.parametrize(
    ("apps", "inits", "expected"), [c[1:] for c in HOST], ids=[c[0] for c in HOST]
)
def test_host_requests_follow_kubernetes(
    apps: list[dict[str, Any]], inits: list[dict[str, Any]], expected: tuple[int, int]
) -> None:
    request = NVIDIA.parse_pod(pod(*apps, init=tuple(inits)))
    assert (request.cpu_milli, request.host_memory_mib) == expected


# -- bad input -----------------------------------------------------------------------

ERRORS = [
    (
        "negative-gpumem",
        pod(ctr(limits=gpu(count="1", mem="-1"))),
        "main",
        "nvidia.com/gpumem",
        "negative",
    ),
    (
        "fractional-gpumem",
        pod(ctr(limits=gpu(count="1", mem="1.5"))),
        "main",
        "nvidia.com/gpumem",
        "whole",
    ),
    ("fractional-count", pod(ctr(limits=gpu(count="500m"))), "main", "nvidia.com/gpu", "whole"),
    ("garbage-count", pod(ctr(limits=gpu(count="two"))), "main", "nvidia.com/gpu", "quantity"),
    ("gpumem-over-int32", pod(ctr(limits=gpu(mem="3G"))), "main", "nvidia.com/gpumem", "at most"),
    (
        "percentage-over-100",
        pod(ctr(limits=gpu(pct="101"))),
        "main",
        "nvidia.com/gpumem-percentage",
        "at most 100",
    ),
    (
        "cores-over-100",
        pod(ctr(limits=gpu(cores="150"))),
        "main",
        "nvidia.com/gpucores",
        "at most 100",
    ),
    (
        "count-zero-with-memory",
        pod(ctr(limits=gpu(count="0", mem="1k"))),
        "main",
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
    ),
    (
        "count-zero-with-cores",
        pod(ctr(limits=gpu(count="0", cores="10"))),
        "main",
        "nvidia.com/gpu",
        "nvidia.com/gpucores",
    ),
    (
        "bad-priority",
        pod(ctr(limits=gpu(count="1", prio="-1"))),
        "main",
        "nvidia.com/priority",
        "negative",
    ),
    (
        "bad-init-container",
        pod(ctr(), init=(ctr("warm", limits=gpu(mem="x")),)),
        "warm",
        "nvidia.com/gpumem",
        "quantity",
    ),
    ("bad-cpu", pod(ctr(requests={"cpu": "lots"})), "main", "cpu", "quantity"),
    (
        "unknown-node-policy",
        pod(ctr(), annotations={"hami.io/node-scheduler-policy": "random"}),
        "",
        "hami.io/node-scheduler-policy",
        "binpack",
    ),
    (
        "unknown-gpu-policy",
        pod(ctr(), annotations={"hami.io/gpu-scheduler-policy": "binpack,best"}),
        "",
        "hami.io/gpu-scheduler-policy",
        "'best'",
    ),
    (
        "numa-bind-yes",
        pod(ctr(), annotations={"nvidia.com/numa-bind": "yes"}),
        "",
        "nvidia.com/numa-bind",
        "boolean",
    ),
    (
        "numa-bind-empty",
        pod(ctr(), annotations={"nvidia.com/numa-bind": ""}),
        "",
        "nvidia.com/numa-bind",
        "boolean",
    ),
    (
        "numa-bind-padded",
        pod(ctr(), annotations={"nvidia.com/numa-bind": " true"}),
        "",
        "nvidia.com/numa-bind",
        "boolean",
    ),
    (
        "annotation-not-string",
        pod(ctr(), annotations={"nvidia.com/use-gputype": ["A10"]}),
        "",
        "nvidia.com/use-gputype",
        "string",
    ),
    (
        "containers-not-list",
        {"spec": {"containers": {"name": "x"}}},
        "",
        "spec.containers",
        "array",
    ),
    ("container-not-object", {"spec": {"containers": ["x"]}}, "", "spec.containers[0]", "object"),
    (
        "limits-not-object",
        pod(ctr(limits=["nvidia.com/gpu"])),
        "main",
        "spec.containers[0].resources.limits",
        "object",
    ),
    ("priority-not-int", pod(ctr(), priority="high"), "", "spec.priority", "integer"),
    (
        "uid-not-string",
        {"metadata": {"uid": 7}, "spec": {"containers": []}},
        "",
        "metadata.uid",
        "string",
    ),
]


@pytest.mark.parametrize(
    ("raw", "container", "field", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_bad_input_names_container_field_and_value(
    raw: dict[str, Any], container: str, field: str, message: str
) -> None:
    with pytest.raises(RequestError, match=message) as caught:
        NVIDIA.parse_pod(raw)
    assert caught.value.container == container
    assert caught.value.field == field
    assert caught.value.value is not None
    assert field in str(caught.value)


def test_pod_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(RequestError, match="JSON object") as caught:
        NVIDIA.parse_pod(["not", "a", "pod"])  # type: ignore[arg-type]
    assert caught.value.field == "pod"
