"""Rules over a pod rather than one container's share: HAMi's ``mutex`` device policy (a
device in use is not given) in every vendor that honours it, and Moore Threads'
``customFilterRule`` ("Only one mthreads device can be shared in a pod"). The planner's
filter, its device choice and the plain reference agree on them, and a refusal names the
rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    NodeInventory,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
    RequestError,
)
from vgpu_extender.domain.share import MUTEX_STAGE, ShareModels, one_device_allows
from vgpu_extender.engine import ClusterIndex, choose_devices
from vgpu_extender.engine.framework.runtime import Planner
from vgpu_extender.engine.reference import reference_fits
from vgpu_extender.policies import default_profile
from vgpu_extender.vendors import Vendor
from vgpu_extender.vendors.hami_pod import DEVICE_POLICY_ANNOTATION, asks_mutex
from vgpu_extender.vendors.metax import metax_vendors
from vgpu_extender.vendors.mthreads import mthreads_vendors
from vgpu_extender.vendors.registry import VENDORS, create_vendor, create_vendors

MTHREADS = mthreads_vendors({})
#: Two Moore Threads GPUs of 96 units (49152 MiB) and 16 cores each.
TWO_MTHREADS_GPUS = {"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192"}


def _pod(
    uid: str,
    *containers: dict[str, str],
    init: tuple[dict[str, str], ...] = (),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    def spec(name: str, limits: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "resources": {"limits": limits}}

    return {
        "metadata": {"uid": uid, "name": uid, "annotations": annotations or {}},
        "spec": {
            "initContainers": [spec(f"i{i}", limits) for i, limits in enumerate(init)],
            "containers": [spec(f"c{i}", limits) for i, limits in enumerate(containers)],
        },
    }


def _gpu(units: int, cores: int = 4) -> dict[str, str]:
    """One Moore Threads GPU of ``units`` x 512 MiB."""
    return {
        "mthreads.com/vgpu": "1",
        "mthreads.com/sgpu-memory": str(units),
        "mthreads.com/sgpu-core": str(cores),
    }


def _index(
    vendor: Vendor, devices: tuple[Device, ...], shares: ShareModels | None = None
) -> ClusterIndex:
    shares = shares or ShareModels.one(vendor.share)
    index = ClusterIndex(initial_nodes=1, initial_slots=8, shares=shares)
    index.upsert_node(NodeInventory("n", devices))
    return index


def _place(index: ClusterIndex, request: PodRequest) -> PodAssignment:
    placed = choose_devices(index, request, "n")
    assert isinstance(placed, PodAssignment), placed
    index.apply(request.uid, placed)
    return placed


def _uuids(assignment: PodAssignment) -> list[list[str]]:
    return [[grant.uuid for grant in container] for container in assignment.containers]


# -- the mutex policy --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "mutex"),
    [
        ("mutex", True),
        ("mutex,spread", True),
        ("spread,numa,mutex", True),
        ("mutex, spread, numa", True),
        (" Mutex ", True),
        ("spread", False),
        ("binpack,spread", False),
        ("binpack,spread,numa", False),
        ("", False),
        ("mutexes", False),
    ],
    ids=[
        "single",
        "chain-first",
        "chain-last",
        "chain-spaces",
        "any-case",
        "other",
        "chain-without",
        "sort-keys-only",
        "empty",
        "longer-word",
    ],
)
def test_the_policy_chain_names_mutex(value: str, mutex: bool) -> None:
    assert asks_mutex({DEVICE_POLICY_ANNOTATION: value}) is mutex


def test_no_policy_is_no_mutex_and_a_non_string_is_refused() -> None:
    assert not asks_mutex({})
    with pytest.raises(RequestError, match=r"hami\.io/gpu-scheduler-policy"):
        asks_mutex({DEVICE_POLICY_ANNOTATION: ["mutex"]})


def test_every_vendors_parse_marks_its_asks_mutex() -> None:
    mutex = {DEVICE_POLICY_ANNOTATION: "binpack,mutex"}
    pod = _pod("p", _gpu(8), {}, annotations=mutex)
    asks = MTHREADS.parse_pod(pod).containers
    assert [(c.count, c.mutex) for c in asks] == [(1, True), (0, True)]
    assert not any(c.mutex for c in MTHREADS.parse_pod(_pod("p", _gpu(8))).containers)
    nvidia = create_vendor("nvidia")
    gpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100"}
    assert nvidia.parse_pod(_pod("p", gpu, annotations=mutex)).containers[0].mutex
    assert not nvidia.parse_pod(_pod("p", gpu)).containers[0].mutex


#: Which vendors' Fit reads the pod's mutex policy (npu.md section 0.5): all but
#: Kunlun's whole card and Enflame's whole GCU, which are alone on their devices anyway.
HONOURS_MUTEX = {
    "NVIDIA": True,
    "Ascend910A": True,
    "Ascend910B2": True,
    "Ascend910B3": True,
    "Ascend910B4-1": True,
    "Ascend910B4": True,
    "Ascend310P": True,
    "Ascend910C": True,
    "MLU": True,
    "DCU": True,
    "MR-V100": True,
    "MR-V50": True,
    "BI-V150": True,
    "BI-V100": True,
    "Metax-GPU": True,
    "Metax-SGPU": True,
    "GCU": False,
    "Enflame": True,
    "kunlun": False,
    "XPU": True,
    "Mthreads": True,
    "AWSNeuron": True,
    "AMD": True,
}
ALL_VENDORS = [vendor for name in VENDORS for vendor in create_vendors(name)]


@pytest.mark.parametrize("vendor", ALL_VENDORS, ids=[v.name for v in ALL_VENDORS])
def test_the_mutex_stage_follows_the_slots_where_the_vendor_honours_it(vendor: Vendor) -> None:
    share = vendor.share
    plain = ContainerRequest("c", count=1, memory_mib=1, cores=1)
    stages = share.stages_for(plain)
    with_mutex = share.stages_for(replace(plain, mutex=True))
    if HONOURS_MUTEX[vendor.name]:
        at = [stage.reason for stage in stages].index(Reason.SLOTS) + 1
        assert with_mutex == (*stages[:at], MUTEX_STAGE, *stages[at:])
    else:
        assert with_mutex == stages


def _hami_nvidia_node() -> tuple[Vendor, ClusterIndex]:
    """HAMi's mutex test: GPU ``used`` holds one share, ``idle`` none (10 slots, 8192
    MiB, 100 cores each)."""
    vendor = create_vendor("nvidia")
    devices = tuple(
        Device(uuid, index=i, count=10, memory_mib=8192, cores=100, type="NVIDIA-A100")
        for i, uuid in enumerate(("used", "idle"))
    )
    index = _index(vendor, devices)
    index.apply("other", PodAssignment("n", ((DeviceGrant("used", 100, 10, "NVIDIA"),),), (False,)))
    return vendor, index


def test_nvidia_mutex_skips_the_used_gpu_and_cannot_take_two() -> None:
    vendor, index = _hami_nvidia_node()
    planner = Planner(index, default_profile())
    mutex = {DEVICE_POLICY_ANNOTATION: "mutex"}
    one = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100", "nvidia.com/gpucores": "10"}
    two = {**one, "nvidia.com/gpu": "2"}
    placed = planner.choose(vendor.parse_pod(_pod("a", one, annotations=mutex)), "n")
    assert isinstance(placed, PodAssignment) and _uuids(placed) == [["idle"]]
    request = vendor.parse_pod(_pod("b", two, annotations=mutex))
    result = planner.filter(request, ["n"])
    assert result.feasible == [] and not reference_fits(index, request, "n")
    rejection = result.rejections["n"]
    assert rejection.reason is Reason.EXCLUSIVE
    assert rejection.message(vendor.wording).startswith("exclusive gpu conflict")
    chosen = planner.choose(request, "n")
    assert isinstance(chosen, Rejection) and chosen.reason is Reason.EXCLUSIVE
    # Without the policy both GPUs have room.
    shared = vendor.parse_pod(_pod("c", two))
    assert planner.filter(shared, ["n"]).feasible == ["n"]
    assert reference_fits(index, shared, "n")


def test_a_mutex_moore_threads_pod_is_refused_a_gpu_in_use_in_hamis_words() -> None:
    one_gpu = {"mthreads.com/sgpu-core": "16", "mthreads.com/sgpu-memory": "96"}
    index = _index(MTHREADS, MTHREADS.devices_from_capacity("n", one_gpu))
    _place(index, MTHREADS.parse_pod(_pod("other", _gpu(8))))
    planner = Planner(index, default_profile())
    request = MTHREADS.parse_pod(
        _pod("p", _gpu(8), annotations={DEVICE_POLICY_ANNOTATION: "mutex"})
    )
    result = planner.filter(request, ["n"])
    assert result.feasible == []
    assert (
        result.rejections["n"]
        .message(MTHREADS.wording)
        .startswith("ExclusiveDeviceAllocateConflict")
    )
    chosen = planner.choose(request, "n")
    assert isinstance(chosen, Rejection) and chosen.reason is Reason.EXCLUSIVE
    assert planner.filter(MTHREADS.parse_pod(_pod("q", _gpu(8))), ["n"]).feasible == ["n"]


# -- Moore Threads: one device per pod -----------------------------------------------


@pytest.mark.parametrize(
    ("earlier", "candidate", "allowed"),
    [
        ((), "a", True),
        (("a",), "a", True),
        (("a", "a"), "a", True),
        (("a",), "b", False),
        (("a", "b"), "a", False),
    ],
    ids=["first-container", "same", "same-twice", "other", "two-held"],
)
def test_hamis_custom_filter_rule(earlier: tuple[str, ...], candidate: str, allowed: bool) -> None:
    assert one_device_allows(earlier, candidate) is allowed


def _two_gpus() -> ClusterIndex:
    return _index(MTHREADS, MTHREADS.devices_from_capacity("n", TWO_MTHREADS_GPUS))


def test_two_containers_land_on_one_moore_threads_gpu() -> None:
    index = _two_gpus()
    planner = Planner(index, default_profile())
    request = MTHREADS.parse_pod(_pod("p", _gpu(8), _gpu(8)))
    assert planner.filter(request, ["n"]).feasible == ["n"]
    assert reference_fits(index, request, "n")
    placed = planner.choose(request, "n")
    assert isinstance(placed, PodAssignment)
    (first,), (second,) = _uuids(placed)
    assert first == second
    annotations = MTHREADS.bind_annotations(placed, bind_time=1)
    assert annotations["hami.io/mthreads-vgpu-devices-allocated"] == (
        f"{first},Mthreads,4096,4:;{first},Mthreads,4096,4:;"
    )


def test_containers_that_fit_only_apart_are_refused_by_the_rule() -> None:
    index = _two_gpus()
    # Each GPU keeps 40 of its 96 units free: either holds one 32-unit container.
    for uid in ("other-0", "other-1"):
        _place(index, MTHREADS.parse_pod(_pod(uid, _gpu(56))))
    planner = Planner(index, default_profile())
    request = MTHREADS.parse_pod(_pod("p", _gpu(32), _gpu(32)))
    result = planner.filter(request, ["n"])
    assert result.feasible == [] and not reference_fits(index, request, "n")
    rejection = result.rejections["n"]
    assert rejection == planner.choose(request, "n")
    assert rejection.reason is Reason.SAME_DEVICE and not rejection.unresolvable
    assert rejection.message(MTHREADS.wording) == (
        "CardNotFoundCustomFilterRule: need 1, have 0 (2 gpus fit the first container; "
        "none holds all 2 of the pod's containers, which share one)"
    )
    # The rule is what refuses: without it the containers take a GPU each.
    free = replace(MTHREADS.share, one_device_per_pod=False)
    apart = _index(MTHREADS, index.devices(0), ShareModels.one(free))
    for uid in ("other-0", "other-1"):
        _place(apart, MTHREADS.parse_pod(_pod(uid, _gpu(56))))
    spread = choose_devices(apart, request, "n")
    gpus = [device.uuid for device in index.devices(0)]
    assert isinstance(spread, PodAssignment) and _uuids(spread) == [[gpus[0]], [gpus[1]]]


def test_a_container_of_two_gpus_leaves_no_gpu_for_the_next_container() -> None:
    index = _two_gpus()
    two = {**_gpu(96, 16), "mthreads.com/vgpu": "2"}
    request = MTHREADS.parse_pod(_pod("p", two, _gpu(2)))
    refused = choose_devices(index, request, "n")
    assert isinstance(refused, Rejection)
    assert refused.reason is Reason.SAME_DEVICE and refused.unresolvable
    assert Planner(index, default_profile()).filter(request, ["n"]).rejections["n"] == refused
    assert not reference_fits(index, request, "n")


def test_init_containers_keep_to_one_gpu_apart_from_the_app_containers() -> None:
    index = _two_gpus()
    _place(index, MTHREADS.parse_pod(_pod("other", _gpu(64))))
    # The init container fits only GPU 1; the app container, later, takes GPU 0 first:
    # HAMi fits the init and app containers against separate lists.
    request = MTHREADS.parse_pod(_pod("p", _gpu(8), init=(_gpu(64),)))
    placed = choose_devices(index, request, "n")
    assert isinstance(placed, PodAssignment)
    gpus = [d.uuid for d in index.devices(0)]
    assert _uuids(placed) == [[gpus[1]], [gpus[0]]]
    assert reference_fits(index, request, "n")
    # Two init containers are held to one GPU as the app containers are: GPU 1, the
    # only one where each fits (init containers are sized against the node apart).
    both = MTHREADS.parse_pod(_pod("q", _gpu(8), init=(_gpu(16), _gpu(64))))
    placed = choose_devices(index, both, "n")
    assert isinstance(placed, PodAssignment)
    assert _uuids(placed) == [[gpus[1]], [gpus[1]], [gpus[0]]]
    assert reference_fits(index, both, "n")
    # One that fits no GPU is refused, with HAMi's reason.
    never = MTHREADS.parse_pod(_pod("r", _gpu(8), init=(_gpu(40), _gpu(97))))
    refused = choose_devices(index, never, "n")
    assert isinstance(refused, Rejection)
    assert not reference_fits(index, never, "n")


@pytest.mark.parametrize(
    ("containers", "annotations"),
    [
        ((_gpu(8), _gpu(8)), {DEVICE_POLICY_ANNOTATION: "mutex"}),
        ((_gpu(60), _gpu(60)), {}),
    ],
    ids=["mutex-two-containers", "more-than-a-gpu-together"],
)
def test_a_pod_no_emptied_gpu_could_hold_is_refused_for_good(
    containers: tuple[dict[str, str], ...], annotations: dict[str, str]
) -> None:
    """Both GPUs are empty: preempting frees nothing that would help, so kube-scheduler
    must not try (unresolvable), where a GPU merely in use leaves it resolvable (above)."""
    index = _two_gpus()
    request = MTHREADS.parse_pod(_pod("p", *containers, annotations=annotations))
    result = Planner(index, default_profile()).filter(request, ["n"])
    assert result.feasible == [] and not reference_fits(index, request, "n")
    rejection = result.rejections["n"]
    assert rejection.reason is Reason.SAME_DEVICE and rejection.unresolvable
    assert rejection == choose_devices(index, request, "n")


def _highest_first(state: Any, container: ContainerRequest, candidates: Sequence[int]) -> list[int]:
    return sorted(candidates, key=lambda slot: -state.devices[slot].index)


@pytest.mark.parametrize("ranker", [None, _highest_first], ids=["by-index", "highest-first"])
def test_the_first_container_takes_a_gpu_that_holds_the_whole_pod(ranker: Any) -> None:
    index = _two_gpus()
    gpus = [d.uuid for d in index.devices(0)]
    # GPU 0 keeps 40 units free, GPU 1 all 96: each holds one 32-unit container, only
    # GPU 1 both. A device policy may prefer GPU 0 (by index: the reference's order).
    _place(index, MTHREADS.parse_pod(_pod("other", _gpu(56))))
    request = MTHREADS.parse_pod(_pod("p", _gpu(32), _gpu(32)))
    placed = (
        choose_devices(index, request, "n")
        if ranker is None
        else choose_devices(index, request, "n", ranker)
    )
    assert isinstance(placed, PodAssignment)
    assert _uuids(placed) == [[gpus[1]], [gpus[1]]]
    assert reference_fits(index, request, "n")
    assert Planner(index, default_profile()).filter(request, ["n"]).feasible == ["n"]


def test_metax_whole_gpus_of_one_pod_spread_over_cards() -> None:
    # HAMi's Test_Fit_MultiContainerPodSpreadsOverCards: a whole card holds one share,
    # so the same-card rule HAMi removed would refuse every second container.
    gpu = metax_vendors({})[0]
    devices = gpu.devices_from_capacity("n", {"metax-tech.com/gpu": "8"})
    index = _index(gpu, devices)
    request = gpu.parse_pod(_pod("p", {"metax-tech.com/gpu": "1"}, {"metax-tech.com/gpu": "1"}))
    assert Planner(index, default_profile()).filter(request, ["n"]).feasible == ["n"]
    placed = choose_devices(index, request, "n")
    assert isinstance(placed, PodAssignment)
    (first,), (second,) = _uuids(placed)
    assert first != second
    assert reference_fits(index, request, "n")
