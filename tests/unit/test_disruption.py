"""PodDisruptionBudget violations, counted as kube-scheduler's preemption does."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.kube.disruption import SelectorError, selects, violations


def _pod(name: str, labels: dict[str, str] | None, namespace: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"u-{name}"}
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta}


def _pdb(
    selector: dict[str, Any] | None,
    allowed: int,
    *,
    namespace: str = "ml",
    disrupted: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = disrupted
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": "budget", "namespace": namespace}, "spec": spec, "status": status}


WEB = {"matchLabels": {"app": "web"}}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (WEB, {"app": "web", "tier": "x"}, True),
        (WEB, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "web"]}]},
            {"app": "web"},
            True,
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
            {"app": "web"},
            False,
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
            {"tier": "x"},
            True,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": "z"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "z"}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            },
            {"app": "web"},
            False,
        ),
        (None, {"app": "web"}, False),  # a nil selector selects nothing
        ({}, {"app": "web"}, False),  # and so does an empty one, for a budget
    ],
)
def test_selects(selector: dict[str, Any] | None, labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"key": "app", "operator": "Near"}]},
        {"matchLabels": ["app"]},
    ],
)
def test_a_malformed_selector_is_refused(selector: dict[str, Any]) -> None:
    with pytest.raises(SelectorError):
        selects(selector, {"app": "web"})


def test_victims_beyond_the_allowed_disruptions_violate() -> None:
    # One disruption allowed, three matching victims: the first is within budget.
    victims = [_pod(n, {"app": "web"}) for n in ("a", "b", "c")]
    assert violations(victims, [_pdb(WEB, 1)]) == 2
    assert violations(victims, [_pdb(WEB, 3)]) == 0
    assert violations(victims, [_pdb(WEB, 0)]) == 3


def test_what_a_budget_does_not_select_never_violates() -> None:
    victims = [
        _pod("other-app", {"app": "db"}),
        _pod("no-labels", None),
        _pod("other-namespace", {"app": "web"}, namespace="default"),
    ]
    assert violations(victims, [_pdb(WEB, 0)]) == 0
    # A malformed budget is skipped, as kube-scheduler skips it.
    bad = _pdb({"matchExpressions": [{"key": "app", "operator": "Near"}]}, 0)
    assert violations([_pod("a", {"app": "web"})], [bad]) == 0


def test_a_pod_already_being_disrupted_is_not_counted_again() -> None:
    victims = [_pod("a", {"app": "web"}), _pod("b", {"app": "web"})]
    budget = _pdb(WEB, 0, disrupted={"a": "2026-01-01T00:00:00Z"})
    assert violations(victims, [budget]) == 1  # only b
