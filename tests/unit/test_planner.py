"""The planner: filter, prioritize, choose and decide, through the profile's plug-ins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.builders import (
    make_container,
    make_index,
    make_node,
    make_request,
    slot_indices,
    use,
)
from vgpu_extender.domain import PodAssignment, PodRequest, Reason, Rejection
from vgpu_extender.engine import ClusterIndex, FitResult
from vgpu_extender.engine.framework import (
    PluginSpec,
    Profile,
    ProfileConfig,
    UnknownPluginError,
)
from vgpu_extender.engine.framework.runtime import Planner, _flat
from vgpu_extender.policies import default_profile
from vgpu_extender.policies.label_priority import DEFAULT_LABEL
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING


def planner_of(index: ClusterIndex, config: ProfileConfig | None = None) -> Planner:
    """A planner over ``index`` with the built-in plug-ins."""
    return Planner(index, default_profile(config))


def cluster() -> ClusterIndex:
    """Three 2-GPU nodes: ``full`` mostly used, ``half`` half used, ``idle`` empty."""
    index = make_index(
        make_node("full", 2, labels={DEFAULT_LABEL: "1"}),
        make_node("half", 2, labels={DEFAULT_LABEL: "50"}),
        make_node("idle", 2, labels={DEFAULT_LABEL: "100"}),
    )
    use(index, "f", "full", [(0, 6144, 60), (1, 6144, 60)])
    use(index, "h", "half", [(0, 8192, 100)])
    return index


NAMES = ["full", "half", "idle"]

# Node scores (HAMi's formula, before this pod), 2 devices of 8192 MiB, 10 slots, 100 cores:
# full: 10 * (2/20 + 120/200 + 12288/16384) = 14.5
# half: 10 * (1/20 + 100/200 + 8192/16384) = 10.5
# idle: 0
# binpack scales 0, 10.5, 14.5 -> idle 0, half 10.5/14.5*10 = 7.24 -> 7, full 10.
PRIORITIES = [
    pytest.param(ProfileConfig(), make_request(1, mem=100), [10, 7, 0], id="binpack"),
    pytest.param(
        ProfileConfig(node_score="spread"), make_request(1, mem=100), [0, 3, 10], id="spread"
    ),
    pytest.param(
        ProfileConfig(),
        make_request(1, mem=100, node_policy="spread"),
        [0, 3, 10],
        id="pod-overrides-node-policy",
    ),
    pytest.param(
        ProfileConfig(node_score="label-priority"),
        make_request(1, mem=100),
        # Labels 1, 50, 100: (50-1)/99*10 = 4.9 -> 5.
        [0, 5, 10],
        id="label-priority",
    ),
    pytest.param(
        ProfileConfig(),
        make_request(0),
        # No managed device: only the fallback (label-priority) can tell nodes apart.
        [0, 5, 10],
        id="unmanaged-pod-uses-fallback",
    ),
]


@pytest.mark.parametrize(("config", "request_", "expected"), PRIORITIES)
def test_prioritize(config: ProfileConfig, request_: PodRequest, expected: list[int]) -> None:
    planner = planner_of(cluster(), config)
    assert planner.prioritize(request_, NAMES) == list(zip(NAMES, expected, strict=True))


def test_prioritize_keeps_input_order_and_scores_unknown_nodes_zero() -> None:
    planner = planner_of(cluster())
    got = planner.prioritize(make_request(1, mem=100), ["idle", "ghost", "full"])
    assert got == [("idle", 0), ("ghost", 0), ("full", 10)]
    assert planner.prioritize(make_request(1), []) == []


FALLBACK = [
    pytest.param(ProfileConfig(), [0, 5, 10], id="label-breaks-the-tie"),
    pytest.param(ProfileConfig(fallback_score=""), [10, 10, 10], id="no-fallback"),
]


@pytest.mark.parametrize(("config", "expected"), FALLBACK)
def test_fallback_when_the_node_policy_is_flat(config: ProfileConfig, expected: list[int]) -> None:
    index = make_index(
        *(make_node(n, 1, labels={DEFAULT_LABEL: v}) for n, v in zip(NAMES, "159", strict=True))
    )
    planner = planner_of(index, config)
    got = planner.prioritize(make_request(1, mem=100), NAMES)
    assert [score for _, score in got] == expected


def test_bad_policy_names_fail_at_start() -> None:
    index = make_index()
    for config in (
        ProfileConfig(node_score="nope"),
        ProfileConfig(device_rank="nope"),
        ProfileConfig(fallback_score="nope"),
    ):
        with pytest.raises(UnknownPluginError, match="unknown policy 'nope'"):
            planner_of(index, config)


def test_filter_explains_and_confirms_multi_container_pods() -> None:
    planner = planner_of(cluster())
    request = make_request(
        containers=[
            make_container(1, mem=4000, cores=40, name="a"),
            make_container(1, mem=4000, cores=40, name="b"),
        ]
    )
    result = planner.filter(request, [*NAMES, "ghost"])
    # full: 2048 MiB left per device; half: one device free for a, but b needs 4000 more
    # MiB on it (8192 - 4000 = 4192 >= 4000 fits), so half fits; idle fits.
    assert result.feasible == ["half", "idle"]
    assert result.rejections["full"].reason is Reason.MEMORY
    assert result.rejections["ghost"] == Rejection(Reason.UNKNOWN_NODE, unresolvable=True)


def test_filter_require_label() -> None:
    index = make_index(
        make_node("good", 1, labels={DEFAULT_LABEL: "3"}),
        make_node("bare", 1),
        make_node("bad", 1, labels={DEFAULT_LABEL: "x"}),
        make_node("tiny", 1, mem=100),
    )
    planner = planner_of(index, ProfileConfig(filters=("label-priority",)))
    result = planner.filter(make_request(1, mem=1000), ["good", "bare", "bad", "tiny"])
    assert result.feasible == ["good"]
    assert result.rows.tolist() == [index.row_of("good")]
    assert {n: r.message(NVIDIA_WORDING) for n, r in result.rejections.items()} == {
        "bare": f"missing priority label: label {DEFAULT_LABEL} missing",
        "bad": f"missing priority label: label {DEFAULT_LABEL}='x' is not an integer",
        # The device reason wins where the node does not fit anyway.
        "tiny": "insufficient gpumem: need 1000 MiB, best free 100 MiB",
    }
    assert all(r.unresolvable for r in result.rejections.values())


def test_best_takes_the_top_node_and_devices_by_the_device_policy() -> None:
    planner = planner_of(cluster())
    decided = planner.best(make_request(1, mem=1000, cores=10), NAMES)
    assert isinstance(decided, tuple)
    node, assignment = decided
    # binpack picks the fullest node that fits; spread picks its emptier device... both
    # devices of "full" hold the same, so the lower index wins.
    assert node == "full"
    assert slot_indices(assignment) == [[0]]


def test_best_with_per_pod_device_policy() -> None:
    index = make_index(make_node("a", 3))
    use(index, "p", "a", [(1, 4000, 40)])
    planner = planner_of(index)
    spread_pick = planner.best(make_request(1, mem=100), ["a"])
    binpack_pick = planner.best(make_request(1, mem=100, device_policy="binpack"), ["a"])
    assert isinstance(spread_pick, tuple) and isinstance(binpack_pick, tuple)
    assert slot_indices(spread_pick[1]) == [[0]]
    assert slot_indices(binpack_pick[1]) == [[1]]
    chosen = planner.choose(make_request(1, mem=100, device_policy="binpack"), "a")
    assert isinstance(chosen, PodAssignment)
    assert slot_indices(chosen) == [[1]]


def test_best_explains_when_nothing_fits() -> None:
    planner = planner_of(cluster())
    decided = planner.best(make_request(3, mem=100), NAMES)
    assert isinstance(decided, FitResult)
    assert decided.feasible == []
    texts = {r.message(NVIDIA_WORDING) for r in decided.rejections.values()}
    assert texts == {"not enough gpus: need 3, have 2"}


def test_scores_of_one_node_skip_the_fallback() -> None:
    planner = planner_of(cluster())
    rows = planner.index.rows_of(["idle"])
    assert planner.scores(make_request(1, mem=100), rows).tolist() == [0.0]


class _NoArgs:
    """A plug-in without arguments."""


class _Recording:
    """A policy that only records what it is told it placed."""

    def __init__(self, name: str, seen: list[tuple[str, str]]) -> None:
        self.name = name
        self._seen = seen

    def score_nodes(self, index: object, request: PodRequest, rows: object) -> object:
        raise AssertionError("not scored here")

    def rank_devices(self, state: object, container: object, candidates: list[int]) -> list[int]:
        return list(candidates)

    def observe(self, request: PodRequest) -> None:
        self._seen.append((self.name, request.uid))


@pytest.mark.parametrize(
    ("node_policy", "device_policy", "expected"),
    [
        ("a", "b", [("a", "u1"), ("b", "u1")]),
        ("a", "a", [("a", "u1")]),
    ],
    ids=["both-policies-learn", "one-policy-learns-once"],
)
def test_observe_tells_each_of_the_pods_policies_once(
    node_policy: str, device_policy: str, expected: list[tuple[str, str]]
) -> None:
    seen: list[tuple[str, str]] = []
    registry = {
        name: PluginSpec(_NoArgs, lambda _a, n=name: _Recording(n, seen)) for name in ("a", "b")
    }
    planner = Planner(
        ClusterIndex(),
        Profile(
            registry,
            ProfileConfig(node_score=node_policy, device_rank=device_policy, fallback_score=""),
        ),
    )
    planner.observe(make_request(uid="u1", count=1, mem=1000))
    assert seen == expected


@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, math.nan, math.inf, -math.inf]), max_size=6))
def test_flat_scores_are_told_as_by_the_plain_rule(values: list[float]) -> None:
    # Flat: no finite score, or every finite score equal (the fallback policy decides).
    finite = [v for v in values if math.isfinite(v)]
    assert _flat(np.array(values, dtype=np.float64)) == (len(set(finite)) <= 1)


# ----------------------------------------------------------------- the request signature


def test_the_signature_is_what_the_share_model_and_plugins_read() -> None:
    profile = default_profile()
    one = make_request(1, mem=1000, uid="u1")
    # Another pod of the same shape: identity, priority and policy names are not read.
    assert profile.signature(one) == profile.signature(
        make_request(1, mem=1000, uid="u2", node_policy="spread")
    )
    assert profile.signature(one) != profile.signature(make_request(1, mem=2000))
    several = make_request(
        containers=[make_container(1, mem=500, name="a"), make_container(1, mem=700)]
    )
    # Several device containers: the device ranker's choice confirms each node, so its
    # signature is part of the pod's; spread and binpack sign differently.
    spread_sig = profile.signature(several)
    assert spread_sig is not None
    binpack_sig = profile.signature(
        make_request(
            containers=[make_container(1, mem=500, name="a"), make_container(1, mem=700)],
            device_policy="binpack",
        )
    )
    assert binpack_sig is not None and binpack_sig != spread_sig
    # fragmentation learns as pods arrive: its part cannot be remembered.
    learning = default_profile(ProfileConfig(device_rank="fragmentation"))
    assert learning.signature(several) is None
    assert learning.signature(one) == profile.signature(one)


class _Unsigned:
    """A device ranker that does not say what it reads."""

    name = "unsigned"

    def score_nodes(self, index: object, request: object, rows: np.ndarray) -> np.ndarray:
        return np.zeros(len(rows))

    def rank_devices(self, state: object, container: object, candidates: list[int]) -> list[int]:
        return sorted(candidates)


def test_a_plugin_that_does_not_sign_makes_its_pods_unremembered() -> None:
    profile = Profile(
        {"unsigned": PluginSpec(_NoArgs, lambda _a: _Unsigned())},
        ProfileConfig(node_score="unsigned", device_rank="unsigned", fallback_score=""),
    )
    assert profile.signature(make_request(1, mem=100)) is not None
    several = make_request(containers=[make_container(1, name="a"), make_container(1)])
    assert profile.signature(several) is None
