"""What kube-scheduler reads from the extender survives its formatting.

kube-scheduler hands an extender's reasons and errors to its event recorder as a format
string, so a ``%`` in them reaches the pod's ``FailedScheduling`` Event as
``%!,(MISSING)``. No reason code's text, no Error and no bind message may contain one,
whatever the numbers or the foreign text (a user's value, a device type) inside it.
kube-scheduler 1.20 reads only ``FailedNodes``, so unresolvable nodes are listed there
too.

Demo nodes: demo-a100-1/2 (4 x A100 80 GB), demo-t4-1/2 (2 x T4 15360 MiB).
"""

from __future__ import annotations

import pytest

from tests.support.server import StartExtender, args, bind_args, place, pod_json
from vgpu_extender.domain import NEUTRAL_WORDING, Reason, Rejection, Wording
from vgpu_extender.domain.text import PERCENT_STAND_IN, without_format_verbs
from vgpu_extender.vendors import VENDORS, create_vendors

DEMO = ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"]
#: The neutral words and every registered vendor's.
WORDING_NAMES = {"neutral": NEUTRAL_WORDING} | {
    name: create_vendors(name)[0].wording for name in VENDORS
}
WORDINGS = list(WORDING_NAMES.values())


@pytest.mark.parametrize("reason", list(Reason), ids=[r.name for r in Reason])
@pytest.mark.parametrize(
    ("need", "have", "detail"),
    [
        (None, None, ""),
        (20, 10, ""),
        (20, 10, "on 2 gpus"),
        (None, None, "type NVIDIA-100%-A100 from a node annotation"),
        (30, 0, "wants 50%"),
    ],
    ids=["bare", "numbers", "numbers-detail", "foreign-detail", "numbers-foreign-detail"],
)
@pytest.mark.parametrize("wording", WORDINGS, ids=list(WORDING_NAMES))
def test_no_reason_text_holds_a_percent_sign(
    reason: Reason, need: int | None, have: int | None, detail: str, wording: Wording
) -> None:
    text = Rejection(reason, need, have, detail=detail).message(wording)
    assert "%" not in text
    assert text.startswith(wording.text(reason))
    if detail:
        assert without_format_verbs(detail) in text


@pytest.mark.parametrize("wording", WORDINGS, ids=list(WORDING_NAMES))
def test_every_wording_words_every_reason_apart(wording: Wording) -> None:
    texts = [wording.text(reason) for reason in Reason]
    assert len(set(texts)) == len(texts)
    # A message is classified by its longest matching prefix: no text may be read as
    # another's (the metric labels and Events group by them).
    for reason in Reason:
        message = Rejection(reason, 1, 0, detail="x").message(wording)
        assert next(t for t in wording.all_texts() if message.startswith(t)) == wording.text(reason)


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ("plain", "plain"),
        ("need 20%", f"need 20{PERCENT_STAND_IN}"),
        ("%!s(MISSING)%%", f"{PERCENT_STAND_IN}!s(MISSING){PERCENT_STAND_IN}{PERCENT_STAND_IN}"),
    ],
    ids=["untouched", "one", "verbs"],
)
def test_foreign_percent_signs_become_the_full_width_sign(text: str, sent: str) -> None:
    assert without_format_verbs(text) == sent


def test_cores_in_use_read_as_percent_in_words(extender: StartExtender) -> None:
    running = extender(demo=True)
    for i in range(2):  # both T4s of demo-t4-1 keep 10 of their 100 cores
        place(running, pod_json(f"busy-{i}", mem=1000, cores=90), "demo-t4-1")
    answer = running.verb("/filter", args(pod_json("late", mem=1000, cores=20), ["demo-t4-1"]))
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"] == {
        "demo-t4-1": "insufficient gpucores: need 20 percent, best free 10 percent"
    }


def test_a_zero_core_request_on_busy_gpus_says_no_compute_is_left(
    extender: StartExtender,
) -> None:
    running = extender(demo=True)
    for i in range(2):  # both T4s of demo-t4-1 have every core taken
        place(running, pod_json(f"busy-{i}", mem=1000, cores=100), "demo-t4-1")
    pod = pod_json("idle", mem=1000, cores=0)
    answer = running.verb("/filter", args(pod, ["demo-t4-1"]))
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"] == {"demo-t4-1": "no compute left on any GPU"}
    assert answer["FailedAndUnresolvableNodes"] == {}
    # Bind words its refusal the same way.
    refused = running.verb("/bind", bind_args(pod, "demo-t4-1"))["Error"]
    assert "no compute left on any GPU" in refused
    assert "%" not in refused


def test_a_type_mismatch_names_the_types_wanted_and_those_the_node_has(
    extender: StartExtender,
) -> None:
    running = extender(demo=True)
    pod = pod_json("a100-only", mem=1000, annotations={"nvidia.com/use-gputype": "A100"})
    answer = running.verb("/filter", args(pod, DEMO))
    assert answer["NodeNames"] == ["demo-a100-1", "demo-a100-2"]
    reasons = answer["FailedAndUnresolvableNodes"]
    assert set(reasons) == {"demo-t4-1", "demo-t4-2"}
    for reason in reasons.values():
        assert reason.startswith("gpu type mismatch: need 1, have 0 (wants a100; node has ")
        assert "T4" in reason
        assert "A100" not in reason.split("node has ")[1]


def test_an_avoided_type_is_named_too(extender: StartExtender) -> None:
    running = extender(demo=True)
    pod = pod_json("no-t4", mem=1000, annotations={"nvidia.com/nouse-gputype": "T4"})
    answer = running.verb("/filter", args(pod, ["demo-t4-1"]))
    (reason,) = answer["FailedAndUnresolvableNodes"].values()
    assert reason.startswith("gpu type mismatch: need 1, have 0 (avoids t4; node has ")


@pytest.mark.parametrize(
    "limits",
    [{"nvidia.com/gpucores": "20%"}, {"nvidia.com/gpumem": "50%"}],
    ids=["cores", "memory"],
)
def test_an_error_echoing_a_users_percent_sign_carries_none(
    extender: StartExtender, limits: dict[str, str]
) -> None:
    running = extender(demo=True)
    pod = pod_json("odd", gpus=1)
    pod["spec"]["containers"][0]["resources"]["limits"].update(limits)
    answer = running.verb("/filter", args(pod, DEMO))
    assert answer["Error"], answer
    assert "%" not in answer["Error"]
    assert PERCENT_STAND_IN in answer["Error"]  # the value is still shown as given
    refused = running.verb("/bind", bind_args(pod, "demo-t4-1"))["Error"]
    assert refused
    assert "%" not in refused


def test_unresolvable_nodes_are_listed_in_failed_nodes_for_old_schedulers(
    extender: StartExtender,
) -> None:
    running = extender(demo=True)
    for i in range(2):  # demo-t4-1 is full but could take the pod after a preemption
        place(running, pod_json(f"filler-{i}", mem=13312), "demo-t4-1")
    answer = running.verb("/filter", args(pod_json("big", mem=20000), DEMO))
    assert answer["NodeNames"] == ["demo-a100-1", "demo-a100-2"]
    unresolvable = answer["FailedAndUnresolvableNodes"]
    assert set(unresolvable) == {"demo-t4-1", "demo-t4-2"}
    assert answer["FailedNodes"] == unresolvable
    late = running.verb("/filter", args(pod_json("late", mem=4000), ["demo-t4-1", "demo-t4-2"]))
    assert late["NodeNames"] == ["demo-t4-2"]
    assert late["FailedNodes"] == {
        "demo-t4-1": "insufficient gpumem: need 4000 MiB, best free 2048 MiB"
    }
    assert late["FailedAndUnresolvableNodes"] == {}
