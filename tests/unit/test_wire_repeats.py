"""Repeated candidate lists: decoded once, and their score answers laid out once."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from vgpu_extender.api import wire
from vgpu_extender.api.repeats import (
    MAX_CUT_SHARE,
    RECENT,
    FeasibleLayouts,
    NameLists,
    ScoreLayouts,
)
from vgpu_extender.services.scheduling import FilterOutcome, Priorities

POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}}


def _body(names: list[str] | None) -> bytes:
    return msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": names})


def _decode_counting() -> tuple[list[int], Any]:
    calls: list[int] = []

    def decode(raw: bytes) -> list[str]:
        calls.append(1)
        names: list[str] = msgspec.json.decode(raw)
        return names

    return calls, decode


def test_a_list_seen_before_is_the_same_tuple_without_decoding() -> None:
    lists = NameLists()
    calls, decode = _decode_counting()
    first = lists.names(b'["a","b"]', decode)
    again = lists.names(b'["a","b"]', decode)
    assert first == ("a", "b")
    assert again is first
    assert len(calls) == 1


def test_lists_differing_in_one_byte_are_different_lists() -> None:
    lists = NameLists()
    calls, decode = _decode_counting()
    assert lists.names(b'["a","b"]', decode) == ("a", "b")
    assert lists.names(b'["a","c"]', decode) == ("a", "c")
    assert len(calls) == 2


def test_only_the_most_recent_lists_are_remembered() -> None:
    lists = NameLists()
    calls, decode = _decode_counting()
    raws = [msgspec.json.encode([f"n{i}"]) for i in range(RECENT + 1)]
    for raw in raws:
        lists.names(raw, decode)
    lists.names(raws[-1], decode)  # still remembered
    assert len(calls) == RECENT + 1
    lists.names(raws[0], decode)  # pushed out by the newer ones
    assert len(calls) == RECENT + 2


def test_a_list_in_use_stays_while_newer_ones_come_and_go() -> None:
    lists = NameLists()
    calls, decode = _decode_counting()
    kept = lists.names(b'["filter"]', decode)
    for i in range(3 * RECENT):
        lists.names(msgspec.json.encode([f"prioritize-{i}"]), decode)
        assert lists.names(b'["filter"]', decode) is kept  # used again after each
    assert len(calls) == 1 + 3 * RECENT


def _plain(hosts: tuple[str, ...], scores: np.ndarray) -> list[dict[str, Any]]:
    """The answer kube-scheduler reads: every host scored above 0 (a host left out
    gets 0 from the extender, as one scored 0 would)."""
    return [{"Host": h, "Score": int(s)} for h, s in zip(hosts, scores, strict=True) if s]


@pytest.mark.parametrize(
    "hosts",
    [
        ("node-a", "node-b", "node-c"),
        ("only",),
        ('quote"d', "back\\slash", "ünïcode", "tab\there"),
    ],
)
def test_a_layout_answers_exactly_what_plain_encoding_would(hosts: tuple[str, ...]) -> None:
    layouts = ScoreLayouts()
    rng = np.random.default_rng(7)
    first = rng.integers(0, 11, len(hosts))
    assert layouts.encode(hosts, first) is None  # the first sighting is encoded plainly
    for _ in range(5):
        scores = rng.integers(0, 11, len(hosts))
        scores[0] = 10  # both widths occur
        if len(hosts) > 1:
            scores[-1] = 0
        encoded = layouts.encode(hosts, scores)
        assert encoded is not None
        decoded = msgspec.json.decode(encoded)
        assert decoded == _plain(hosts, scores)
        assert all(type(item["Score"]) is int for item in decoded)


@pytest.mark.parametrize(
    ("scores", "answer"),
    [
        ([0, 0, 0], []),
        ([3, 0, 10], [{"Host": "a", "Score": 3}, {"Host": "c", "Score": 10}]),
        ([0, 0, 7], [{"Host": "c", "Score": 7}]),
        ([7, 0, 0], [{"Host": "a", "Score": 7}]),
        (
            [1, 2, 3],
            [{"Host": "a", "Score": 1}, {"Host": "b", "Score": 2}, {"Host": "c", "Score": 3}],
        ),
    ],
    ids=["all-zero", "middle-zero", "only-last", "only-first", "none-zero"],
)
def test_a_layout_leaves_out_the_hosts_scored_zero(
    scores: list[int], answer: list[dict[str, Any]]
) -> None:
    layouts = ScoreLayouts()
    hosts = ("a", "b", "c")
    layouts.encode(hosts, np.array([1, 1, 1]))  # the first sighting
    encoded = layouts.encode(hosts, np.array(scores, dtype=np.int64))
    assert encoded is not None
    assert msgspec.json.decode(encoded) == answer


def test_names_of_very_different_lengths_are_encoded_the_ordinary_way() -> None:
    # Padding every row to a 200-character name would make the answer several times
    # larger than the names themselves: such a list gets no layout, and the ordinary
    # encoding answers the same.
    layouts = ScoreLayouts()
    hosts = ("a" * 200, *(f"n{i}" for i in range(20)))
    scores = np.arange(len(hosts), dtype=np.int64) % 11
    layouts.encode(hosts, scores)
    assert layouts.encode(hosts, scores) is None
    plain = msgspec.json.decode(wire.encode_priorities(Priorities(hosts, scores)))
    assert plain == _plain(hosts, scores)


def test_rows_are_padded_with_json_whitespace_only() -> None:
    layouts = ScoreLayouts()
    hosts = ("node-a", "node-bbb", "node-cc")
    scores = np.array([4, 10, 0], dtype=np.int64)
    layouts.encode(hosts, scores)
    encoded = layouts.encode(hosts, scores)
    assert encoded is not None
    assert (
        encoded.replace(b" ", b"")
        == b'[{"Host":"node-a","Score":4},{"Host":"node-bbb","Score":10}]'
    )


def test_layouts_refuse_what_they_cannot_lay_out() -> None:
    layouts = ScoreLayouts()
    hosts = ("a", "b")
    scores = np.array([1, 2])
    assert layouts.encode(["a", "b"], scores) is None  # not a remembered tuple
    layouts.encode(hosts, scores)
    assert layouts.encode(hosts, np.array([1, 11])) is None  # beyond MaxExtenderPriority
    assert layouts.encode(hosts, np.array([-1, 2])) is None
    assert layouts.encode(hosts, np.array([1])) is None  # lengths differ
    assert layouts.encode((), np.array([], dtype=np.int64)) is None


def test_decoding_the_same_body_twice_shares_the_candidate_tuple() -> None:
    names = [f"node-{i}" for i in range(50)]
    first = wire.decode_args(_body(names))
    again = wire.decode_args(_body(names))
    assert list(first.names) == names
    assert again.names is first.names


def test_null_and_missing_names_are_no_candidates() -> None:
    assert list(wire.decode_args(_body(None)).names) == []
    body = msgspec.json.encode({"Pod": POD, "Nodes": None})
    assert list(wire.decode_args(body).names) == []


def test_malformed_names_are_a_wire_error_naming_the_field() -> None:
    body = msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": [1, 2]})
    with pytest.raises(wire.WireError, match="NodeNames"):
        wire.decode_args(body)


def test_filter_answer_is_the_same_whether_every_node_passes_or_not() -> None:
    names = ["a", "b", "c"]
    args = wire.decode_args(_body(names))
    everyone = msgspec.json.decode(wire.encode_filter(args, FilterOutcome(feasible=names)))
    assert everyone["NodeNames"] == names
    some = FilterOutcome(feasible=["a", "c"], failed={"b": "insufficient gpumem"})
    partly = msgspec.json.decode(wire.encode_filter(args, some))
    assert partly["NodeNames"] == ["a", "c"]
    assert partly["FailedNodes"] == {"b": "insufficient gpumem"}


def test_priorities_encode_the_same_on_first_and_later_requests() -> None:
    names = [f"n{i}" for i in range(20)]
    hosts = wire.decode_args(_body(names)).names
    scores = np.arange(20, dtype=np.int64) % 11
    answers = [msgspec.json.decode(wire.encode_priorities(Priorities(hosts, scores)))]
    answers.append(msgspec.json.decode(wire.encode_priorities(Priorities(hosts, scores))))
    answers.append(msgspec.json.decode(wire.encode_priorities(Priorities(list(hosts), scores))))
    assert answers[0] == answers[1] == answers[2] == _plain(tuple(names), scores)


def _cut(hosts: tuple[str, ...], rejected: set[str]) -> bytes | None:
    """The feasible answer cut from ``hosts``' array, after a first sighting."""
    layouts = FeasibleLayouts()
    feasible = [host for host in hosts if host not in rejected]
    assert layouts.encode(hosts, feasible, rejected) is None  # the first sighting
    return layouts.encode(hosts, feasible, rejected)


@pytest.mark.parametrize(
    "rejected",
    [{"n0"}, {"n19"}, {"n7"}, {"n7", "n8"}, {"n0", "n1", "n19"}, {"n3", "n9", "n15"}],
    ids=["first", "last", "middle", "adjacent", "both-ends", "spread"],
)
def test_a_cut_answer_is_the_feasible_names_in_order(rejected: set[str]) -> None:
    hosts = tuple(f"n{i}" for i in range(20))
    cut = _cut(hosts, rejected)
    assert cut is not None
    assert msgspec.json.decode(cut) == [host for host in hosts if host not in rejected]


def test_a_cut_keeps_names_that_need_escaping_exact() -> None:
    hosts = ('quote"d', "back\\slash", "ünïcode", "tab\there", "plain", "x", "y", "z")
    cut = _cut(hosts, {"ünïcode"})
    assert cut is not None
    assert msgspec.json.decode(cut) == [host for host in hosts if host != "ünïcode"]


def test_cuts_refuse_what_is_not_a_cut_of_the_list() -> None:
    layouts = FeasibleLayouts()
    hosts = tuple(f"n{i}" for i in range(20))
    feasible = list(hosts[1:])
    layouts.encode(hosts, feasible, {"n0"})
    assert layouts.encode(hosts, feasible, {"n0"}) is not None
    assert layouts.encode(list(hosts), feasible, {"n0"}) is None  # not a remembered tuple
    assert layouts.encode(hosts, feasible, set()) is None  # nothing rejected: echoed instead
    assert layouts.encode(hosts, feasible, {"elsewhere"}) is None  # a name not listed
    reordered = [feasible[1], feasible[0], *feasible[2:]]
    assert layouts.encode(hosts, reordered, {"n0"}) is None  # not in the input order
    assert layouts.encode(hosts, feasible[:-1], {"n0"}) is None  # one missing unexplained
    # The lengths agree, the names do not: n1 is feasible and rejected, n0 neither.
    assert layouts.encode(hosts, feasible, {"n1"}) is None
    many = {f"n{i}" for i in range(int(MAX_CUT_SHARE * 20) + 1)}
    assert layouts.encode(hosts, [h for h in hosts if h not in many], many) is None


def test_a_list_naming_a_node_twice_is_not_cut() -> None:
    hosts = ("a", "b", "a", "c", "d", "e", "f", "g")
    assert _cut(hosts, {"b"}) is None


def test_filter_answers_a_few_failed_nodes_the_same_first_and_later() -> None:
    names = [f"gpu-node-{i:04d}" for i in range(40)]
    full = {"gpu-node-0003": "insufficient gpumem", "gpu-node-0017": "no free slot"}
    unknown = {"gpu-node-0039": "node not found"}
    outcome = FilterOutcome(
        feasible=[n for n in names if n not in full and n not in unknown],
        failed=full,
        unresolvable=unknown,
    )
    answers = []
    for _ in range(3):
        args = wire.decode_args(_body(names))
        answers.append(msgspec.json.decode(wire.encode_filter(args, outcome)))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["NodeNames"] == outcome.feasible
    assert answers[0]["FailedNodes"] == {**full, **unknown}
    assert answers[0]["FailedAndUnresolvableNodes"] == unknown
