"""Placement policies: HAMi's usage formulas, label-priority, the registry, and the
contract every registered policy keeps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from tests.support.builders import (
    make_container,
    make_index,
    make_node,
    make_request,
    use,
)
from vgpu_extender.domain import ContainerRequest, NodeInventory, PodAssignment, PodRequest
from vgpu_extender.engine import ClusterIndex, NodeState, fit, to_extender_scores
from vgpu_extender.engine.framework import (
    DeviceRankPlugin,
    FloatVec,
    IntVec,
    Planner,
    PluginSpec,
    Profile,
    ProfileConfig,
    ProfileError,
    UnknownPluginError,
)
from vgpu_extender.policies import BUILTIN, default_profile
from vgpu_extender.policies.label_priority import (
    DEFAULT_LABEL,
    LabelPriority,
    LabelPriorityArgs,
    label_value,
)
from vgpu_extender.policies.usage import (
    DeviceWeights,
    UsageArgs,
    binpack,
    device_usage_score,
    node_usage_score,
    spread,
)

Grant = tuple[int, int, int]

# ----------------------------------------------------------------- binpack and spread

NODE_SCORES = [
    pytest.param([], 0.0, id="empty"),
    pytest.param(
        [[(0, 2048, 50)]],
        # 10 * (1/20 slots + 50/200 cores + 2048/16384 MiB) = 10 * 0.425
        4.25,
        id="one-share",
    ),
    pytest.param(
        [[(0, 8192, 100)], [(1, 8192, 100)]],
        # 10 * (2/20 + 200/200 + 16384/16384) = 21
        21.0,
        id="full",
    ),
    pytest.param(
        [[(0, 1024, 10), (1, 1024, 10)], [(0, 3072, 30)]],
        # 10 * (3/20 + 50/200 + 5120/16384) = 10 * 0.7125
        7.125,
        id="two-pods",
    ),
]


@pytest.mark.parametrize(("held", "expected"), NODE_SCORES)
def test_node_usage_score(held: list[list[Grant]], expected: float) -> None:
    index = make_index(make_node("a", 2), make_node("idle", 2))
    for i, containers in enumerate(held):
        use(index, f"p{i}", "a", containers)
    rows = index.rows_of(["a", "idle"])
    assert node_usage_score(index, rows).tolist() == pytest.approx([expected, 0.0])
    request = make_request(1, mem=1)
    assert binpack().score_nodes(index, request, rows).tolist() == pytest.approx([expected, 0])
    assert spread().score_nodes(index, request, rows).tolist() == pytest.approx([-expected, 0])


def test_node_usage_score_of_a_node_without_devices() -> None:
    index = make_index(make_node("bare", 0))
    assert node_usage_score(index, index.rows_of(["bare"])).tolist() == [0.0]


DEVICE_SCORES = [
    pytest.param(
        make_container(1, mem=1000, cores=10),
        DeviceWeights(),
        # 10 * ((1+1)/10 + (10+20)/100 + (1000+2000)/8192)
        10 * (0.2 + 0.3 + 3000 / 8192),
        id="default-weights",
    ),
    pytest.param(
        make_container(1, mem=1000, cores=10),
        DeviceWeights(slot=1, core=1, memory=3),
        10 * (0.2 + 0.3 + 3 * 3000 / 8192),
        id="memory-weighted",
    ),
    pytest.param(
        make_container(1, pct=50, cores=0),
        DeviceWeights(),
        # 50 % of 8192 = 4096: 10 * (2/10 + 20/100 + (4096+2000)/8192)
        10 * (0.2 + 0.2 + 6096 / 8192),
        id="percent-memory",
    ),
]


@pytest.mark.parametrize(("container", "weights", "expected"), DEVICE_SCORES)
def test_device_usage_score(
    container: ContainerRequest, weights: DeviceWeights, expected: float
) -> None:
    index = make_index(make_node("a", 1))
    use(index, "p", "a", [(0, 2000, 20)])
    state = NodeState.of(index, index.row_of("a") or 0)
    assert device_usage_score(state, 0, container, weights) == pytest.approx(expected)


def ranked_state() -> NodeState:
    """Four devices: 0 and 2 idle, 1 lightly used, 3 heavily used."""
    index = make_index(make_node("a", 4))
    use(index, "p1", "a", [(1, 1000, 10)])
    use(index, "p3", "a", [(3, 6000, 60)])
    return NodeState.of(index, index.row_of("a") or 0)


RANKINGS = [
    pytest.param(spread(), [0, 1, 2, 3], [0, 2, 1, 3], id="spread-emptiest-first"),
    pytest.param(binpack(), [0, 1, 2, 3], [3, 1, 0, 2], id="binpack-fullest-first"),
    pytest.param(spread(), [3, 2], [2, 3], id="spread-subset"),
    pytest.param(binpack(), [2, 0], [0, 2], id="ties-by-index"),
]


@pytest.mark.parametrize(("policy", "candidates", "expected"), RANKINGS)
def test_usage_rank_devices(
    policy: DeviceRankPlugin, candidates: list[int], expected: list[int]
) -> None:
    share = make_container(1, mem=500, cores=5)
    assert policy.rank_devices(ranked_state(), share, candidates) == expected


def test_device_weights_come_from_the_arguments() -> None:
    # Memory alone: device 1 (1000 MiB used) is fuller than device 0 (10 cores used only).
    index = make_index(make_node("a", 2))
    use(index, "p0", "a", [(0, 0, 90)])
    use(index, "p1", "a", [(1, 1000, 0)])
    state = NodeState.of(index, index.row_of("a") or 0)
    share = make_container(1, mem=100, cores=1)
    memory_only = default_profile(args={"binpack": UsageArgs(DeviceWeights(0, 0, 1))})
    assert memory_only.device_rankers["binpack"].rank_devices(state, share, [0, 1]) == [1, 0]
    cores_only = default_profile(args={"binpack": {"device_weights": DeviceWeights(0, 1, 0)}})
    assert cores_only.device_rankers["binpack"].rank_devices(state, share, [0, 1]) == [0, 1]


# ----------------------------------------------------------------- label-priority

LABELS = [
    pytest.param({DEFAULT_LABEL: "20"}, 20.0, "", id="integer"),
    pytest.param({DEFAULT_LABEL: " -3 "}, -3.0, "", id="negative-with-spaces"),
    pytest.param({}, math.nan, f"label {DEFAULT_LABEL} missing", id="missing"),
    pytest.param(
        {DEFAULT_LABEL: "high"},
        math.nan,
        f"label {DEFAULT_LABEL}='high' is not an integer",
        id="not-a-number",
    ),
    pytest.param(
        {DEFAULT_LABEL: "1.5"},
        math.nan,
        f"label {DEFAULT_LABEL}='1.5' is not an integer",
        id="fraction",
    ),
    pytest.param(
        {DEFAULT_LABEL: ""}, math.nan, f"label {DEFAULT_LABEL}='' is not an integer", id="empty"
    ),
    pytest.param(
        {DEFAULT_LABEL: "9" * 400},
        math.nan,
        f"label {DEFAULT_LABEL}={'9' * 400!r} is not an integer",
        id="too-large",
    ),
]


@pytest.mark.parametrize(("labels", "value", "problem"), LABELS)
def test_label_value(labels: dict[str, str], value: float, problem: str) -> None:
    got, why = label_value(labels, DEFAULT_LABEL)
    assert (math.isnan(got) and math.isnan(value)) or got == value
    assert why == problem


def labelled(*values: str | None, key: str = DEFAULT_LABEL) -> ClusterIndex:
    """Nodes n0, n1, ... with the given label values (None: no label)."""
    return make_index(
        *(make_node(f"n{i}", 1, labels={} if v is None else {key: v}) for i, v in enumerate(values))
    )


def test_label_priority_scores_and_problems() -> None:
    index = labelled("100", "2000", None, "x")
    rows = index.rows_of(["n0", "n1", "n2", "n3"])
    policy = LabelPriority()
    raw = policy.score_nodes(index, make_request(1), rows)
    assert raw[:2].tolist() == [100.0, 2000.0]
    assert np.isnan(raw[2:]).all()
    # Raw values never leave: 100 and 2000 become 1 and 10, unusable labels score 0,
    # below the lowest labelled node.
    assert to_extender_scores(raw) == [1, 10, 0, 0]
    assert policy.label_problems(index, rows) == {
        "n2": f"label {DEFAULT_LABEL} missing",
        "n3": f"label {DEFAULT_LABEL}='x' is not an integer",
    }


def test_label_priority_reads_the_configured_key_and_sees_new_labels() -> None:
    index = labelled("1", "5", key="example.com/rank")
    profile = default_profile(args={"label-priority": LabelPriorityArgs("example.com/rank")})
    policy = profile.node_scorers["label-priority"]
    rows = index.rows_of(["n0", "n1"])
    assert policy.score_nodes(index, make_request(1), rows).tolist() == [1.0, 5.0]
    index.upsert_node(make_node("n0", 1, labels={"example.com/rank": "9"}))
    assert policy.score_nodes(index, make_request(1), rows).tolist() == [9.0, 5.0]


# ----------------------------------------------------------------- registry


def test_registry_builds_each_policy_once() -> None:
    profile = default_profile()
    assert set(profile.plugins) >= {"binpack", "spread", "label-priority", "fragmentation"}
    # One instance serves every role it has (what fragmentation observes, it scores by).
    assert profile.node_scorers["binpack"] is profile.device_rankers["binpack"]
    assert profile.observers["fragmentation"] is profile.node_scorers["fragmentation"]
    assert profile.node_scorers["spread"].name == "spread"


def test_registry_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPluginError) as caught:
        default_profile(ProfileConfig(node_score="mutex"))
    assert str(caught.value).startswith("unknown policy 'mutex' (known: binpack, ")


def test_registry_takes_its_factories() -> None:
    profile = Profile({"only": BUILTIN["spread"]}, ProfileConfig("only", "only", fallback_score=""))
    assert set(profile.plugins) == {"only"}
    ranked = profile.device_rankers["only"].rank_devices(ranked_state(), make_container(1), [3, 0])
    assert ranked == [0, 3]


ROLES = {
    # plug-in: (filter, node score, device rank, observe)
    "binpack": (False, True, True, False),
    "spread": (False, True, True, False),
    "label-priority": (True, True, True, False),  # no device preference: by index
    "fragmentation": (False, True, True, True),
    "lookahead": (False, True, True, True),
    "sum-squares": (False, True, True, True),
    "ss-lookahead": (False, True, True, True),
}


def test_each_plugin_has_exactly_its_roles() -> None:
    profile = default_profile(ProfileConfig(filters=("label-priority",)))
    for name, (filters, scores, ranks, observes) in ROLES.items():
        assert (profile.plugins[name] in profile.filters) is filters, name
        assert (name in profile.node_scorers) is scores, name
        assert (name in profile.device_rankers) is ranks, name
        assert (name in profile.observers) is observes, name
    assert set(ROLES) == set(BUILTIN)


# ----------------------------------------------------------------- profile validation

BAD_PROFILES = [
    pytest.param(
        ProfileConfig(), {"mutex": {}}, UnknownPluginError, "unknown policy 'mutex'", id="unknown"
    ),
    pytest.param(
        ProfileConfig(filters=("nope",)),
        {},
        UnknownPluginError,
        "unknown policy 'nope'",
        id="unknown-filter",
    ),
    pytest.param(
        ProfileConfig(),
        {"label-priority": {"label": 3}},
        ProfileError,
        "plug-in 'label-priority': argument 'label' must be a non-empty string, not 3",
        id="wrong-argument-type",
    ),
    pytest.param(
        ProfileConfig(),
        {"binpack": {"device_weights": (1, 1, 1)}},
        ProfileError,
        "plug-in 'binpack': argument 'device_weights' must be DeviceWeights, not tuple",
        id="wrong-nested-type",
    ),
    pytest.param(
        ProfileConfig(),
        {"fragmentation": {"typical_pods": ((1.0, "big"),)}},
        ProfileError,
        "plug-in 'fragmentation': argument 'typical_pods' must be a tuple of",
        id="wrong-typical-pods",
    ),
    pytest.param(
        ProfileConfig(),
        {"fragmentation": {"host_pack": 2}},
        ProfileError,
        r"plug-in 'fragmentation': argument 'host_pack' must be a number in \[0, 1\), not 2",
        id="argument-out-of-range",
    ),
    pytest.param(
        ProfileConfig(),
        {"spread": {"weights": DeviceWeights()}},
        ProfileError,
        "plug-in 'spread': .*'weights'",
        id="argument-the-plugin-lacks",
    ),
    pytest.param(
        ProfileConfig(),
        {"spread": LabelPriorityArgs()},
        ProfileError,
        "plug-in 'spread': arguments must be UsageArgs or a mapping of its fields, "
        "not LabelPriorityArgs",
        id="arguments-of-another-plugin",
    ),
    pytest.param(
        ProfileConfig(filters=("binpack",)),
        {},
        ProfileError,
        r"plug-in 'binpack' is not a filter plug-in \(filter plug-ins: label-priority\)",
        id="not-a-filter",
    ),
]


@pytest.mark.parametrize(("config", "args", "error", "message"), BAD_PROFILES)
def test_a_bad_profile_fails_naming_the_plugin_and_argument(
    config: ProfileConfig, args: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        default_profile(config, args)


def test_an_argument_type_checks_its_own_values() -> None:
    with pytest.raises(ValueError, match=r"argument .device_weights\.memory. must be a number"):
        DeviceWeights(memory=-1)


@dataclass(frozen=True)
class _NoArgs:
    pass


class _ScoreOnly:
    """A plug-in with the node score role only."""

    name = "score-only"

    def score_nodes(self, index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec:
        return np.zeros(len(rows))


def _with_score_only() -> dict[str, PluginSpec[object]]:
    return {**BUILTIN, "score-only": PluginSpec(_NoArgs, lambda args: _ScoreOnly())}


def test_a_profile_naming_a_plugin_for_a_role_it_lacks_fails() -> None:
    with pytest.raises(ProfileError, match="plug-in 'score-only' is not a device rank plug-in"):
        Profile(_with_score_only(), ProfileConfig(device_rank="score-only"))


def test_a_pod_naming_a_plugin_for_a_role_it_lacks_is_refused() -> None:
    profile = Profile(_with_score_only())
    with pytest.raises(ProfileError, match="not a device rank plug-in"):
        profile.ranker(make_request(1, device_policy="score-only"))


def test_label_priority_ranks_devices_by_index_as_a_device_policy() -> None:
    profile = default_profile(ProfileConfig(device_rank="label-priority"))
    index = make_index(make_node("n", 3))
    state = NodeState.of(index, index.row_of("n") or 0)
    ranked = profile.ranker(make_request(1))(state, make_container(1), [2, 0, 1])
    assert ranked == [0, 1, 2]


# ----------------------------------------------------------------- the shared contract

POLICY_NAMES = sorted(BUILTIN)
DEVICE_RANKERS = sorted(default_profile().device_rankers)


def contract_cluster() -> ClusterIndex:
    """Nodes in different states, labelled, so every policy has something to tell apart."""
    nodes: list[NodeInventory] = [
        make_node("idle", 4, labels={DEFAULT_LABEL: "1"}),
        make_node("busy", 4, labels={DEFAULT_LABEL: "5"}, numa=[0, 0, 1, 1]),
        make_node("small", 2, mem=4096, labels={DEFAULT_LABEL: "3"}),
        make_node("mixed", 4, mem=[8192, 16384, 8192, 16384], cpu_milli=8000),
    ]
    index = make_index(*nodes)
    use(index, "b1", "busy", [(0, 6000, 60), (1, 2000, 20)])
    use(index, "b2", "busy", [(2, 8192, 100)])
    use(index, "s1", "small", [(0, 1000, 10)])
    index.apply("m1", PodAssignment("mixed", ()), cpu_milli=6000)
    return index


CONTRACT_REQUESTS = [
    pytest.param(make_request(1, mem=1000, cores=10), id="one-share"),
    pytest.param(make_request(2, pct=50, cores=20), id="two-half-devices"),
    pytest.param(make_request(1, pct=100, cores=100), id="whole-device"),
    pytest.param(
        make_request(
            containers=[make_container(1, mem=500, cores=5, name="a"), make_container(1, mem=500)]
        ),
        id="two-containers",
    ),
    pytest.param(make_request(1, mem=1000, numa_bind=True, cpu_milli=1000), id="numa-and-cpu"),
]


@pytest.fixture(params=POLICY_NAMES)
def policy_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.mark.parametrize("request_", CONTRACT_REQUESTS)
def test_policy_contract_scores(policy_name: str, request_: PodRequest) -> None:
    policy = default_profile().node_scorers[policy_name]
    assert policy.name == policy_name
    index = contract_cluster()
    before = (index.version, index.cols.mem_free.copy(), index.cols.cores_free.copy())
    result = fit(index, request_, index.node_names())
    assert result.feasible, "the contract cluster should take every contract request"
    raw = np.asarray(policy.score_nodes(index, request_, result.rows))
    assert raw.dtype == np.float64
    assert raw.shape == (len(result.rows),)
    assert not np.isposinf(raw).any() and not np.isneginf(raw).any()
    # Same inputs, same scores; scoring reads the index and never changes it.
    np.testing.assert_array_equal(raw, policy.score_nodes(index, request_, result.rows))
    assert index.version == before[0]
    np.testing.assert_array_equal(index.cols.mem_free, before[1])
    np.testing.assert_array_equal(index.cols.cores_free, before[2])
    scaled = to_extender_scores(raw)
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scaled)
    assert len(policy.score_nodes(index, request_, np.zeros(0, dtype=np.int64))) == 0


@pytest.mark.parametrize("ranker_name", DEVICE_RANKERS)
@pytest.mark.parametrize("request_", CONTRACT_REQUESTS)
def test_policy_contract_devices(ranker_name: str, request_: PodRequest) -> None:
    policy = default_profile().device_rankers[ranker_name]
    index = contract_cluster()
    for node in index.node_names():
        state = NodeState.of(index, index.row_of(node) or 0, request_)
        snapshot = (list(state.mem_free), list(state.cores_free), list(state.slots_free))
        for container in request_.device_containers:
            candidates = [s for s in range(len(state.devices)) if state.fits(s, container) is None]
            for subset in (candidates, candidates[::-1], candidates[:1]):
                order = policy.rank_devices(state, container, subset)
                # A permutation of what it was given, the same each time.
                assert sorted(order) == sorted(subset)
                assert order == policy.rank_devices(state, container, subset)
                assert policy.rank_devices(state, container, list(reversed(subset))) == order
        assert (state.mem_free, state.cores_free, state.slots_free) == (
            snapshot[0],
            snapshot[1],
            snapshot[2],
        )


@pytest.mark.parametrize("request_", CONTRACT_REQUESTS)
def test_policy_contract_places_pods_that_apply(policy_name: str, request_: PodRequest) -> None:
    index = contract_cluster()
    config = ProfileConfig(node_score=policy_name, device_rank=_device_policy(policy_name))
    planner = Planner(index, default_profile(config))
    best = planner.best(request_, index.node_names())
    assert isinstance(best, tuple), best
    node, assignment = best
    assert assignment.node == node
    planner.observe(request_)
    index.apply("placed", assignment, cpu_milli=request_.cpu_milli)  # never over-allocates
    # Observing and placing leave the policy able to score again.
    after = fit(index, request_, index.node_names())
    scores = planner.node_scorer(request_).score_nodes(index, request_, after.rows)
    assert len(scores) == len(after.rows)


def _device_policy(name: str) -> str:
    """The policy itself where it ranks devices; label-priority has no device preference
    (spread ranks them)."""
    return name if name in DEVICE_RANKERS else "spread"


def test_every_registered_policy_is_in_the_contract_suite() -> None:
    assert set(POLICY_NAMES) == set(BUILTIN)
    assert set(DEVICE_RANKERS) <= set(BUILTIN)
    assert isinstance(POLICY_NAMES, Sequence)
