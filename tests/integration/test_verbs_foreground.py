"""The verbs of kube-scheduler's scheduling cycle mark themselves in and out of the
runtime's foreground, which the background passes give way to (``services.pacing``), a
bad request included; bind, which kube-scheduler waits for apart, does not."""

from __future__ import annotations

import time

import pytest

from tests.support.server import StartExtender, args, bind_args, pod_json
from vgpu_extender.services.pacing import Foreground


class Recorded(Foreground):
    def __init__(self) -> None:
        super().__init__()
        self.marks: list[str] = []

    def enter(self) -> None:
        self.marks.append("in")
        super().enter()

    def leave(self) -> None:
        self.marks.append("out")
        super().leave()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/filter", args(pod_json("web", mem=1000), ["demo-t4-1"])),
        ("/prioritize", args(pod_json("web", mem=1000), ["demo-t4-1"])),
        ("/filter", b"{not json"),
    ],
    ids=["filter", "prioritize", "malformed"],
)
def test_a_verb_is_in_the_foreground_while_it_is_answered(
    extender: StartExtender, path: str, body: object
) -> None:
    running = extender(demo=True)
    recorded = Recorded()
    running.runtime.foreground = recorded

    running.verb(path, body)

    assert recorded.marks == ["in", "out"]
    # Out again: once the linger is over, nothing holds the passes back.
    assert not recorded.busy(time.perf_counter() + 1.0)


def test_bind_stays_out_of_the_foreground(extender: StartExtender) -> None:
    running = extender(demo=True)
    recorded = Recorded()
    running.runtime.foreground = recorded
    pod = pod_json("web", mem=1000)

    running.verb("/bind", bind_args(pod, "demo-t4-1"))

    assert recorded.marks == []
