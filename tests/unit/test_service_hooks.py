"""The services report through hooks given to them when the runtime is built: no wrapper
is swapped in afterwards, and a runtime built without hooks reports nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.server import pod_json, standalone_settings
from vgpu_extender.services.binding import BindingService, BindRequest
from vgpu_extender.services.hooks import ServiceHooks
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome, SchedulingService

NODES = ["demo-a100-1", "demo-t4-1"]


class _Seen:
    def __init__(self) -> None:
        self.filters: list[tuple[str, int, list[str]]] = []
        self.binds: list[tuple[str, str]] = []
        self.batches: list[int] = []

    def filtered(self, pod: Mapping[str, Any], total: int, outcome: FilterOutcome) -> None:
        self.filters.append((pod["metadata"]["name"], total, list(outcome.feasible)))

    def bound(self, args: BindRequest, error: str) -> None:
        self.binds.append((args.pod_name, error))


def test_the_services_report_to_the_hooks_they_were_built_with(tmp_path: Path) -> None:
    seen = _Seen()
    hooks = ServiceHooks(filtered=seen, bound=seen, bind_batch=seen.batches.append)
    runtime = Runtime.build(standalone_settings(tmp_path, demo=True), hooks=hooks)
    runtime.start()
    try:
        # The services are the plain ones: nothing wraps them.
        assert type(runtime.scheduling) is SchedulingService
        assert type(runtime.binding) is BindingService
        pod = pod_json("web", mem=20000)
        runtime.scheduling.filter(pod, NODES)
        runtime.scheduling.filter_one(pod, NODES)
        assert seen.filters == [("web", 2, ["demo-a100-1"]), ("web", 2, ["demo-a100-1"])]
        args = BindRequest("web", "default", "uid-web", "demo-a100-1")
        assert runtime.binding.bind(args) == ""
        assert runtime.binding.bind(BindRequest("web", "default", "uid-web", "nowhere")) != ""
        assert [name for name, _ in seen.binds] == ["web", "web"]
        assert seen.binds[0][1] == "" and seen.binds[1][1] != ""
        assert seen.batches == [1]
    finally:
        runtime.stop()


def test_a_runtime_built_without_hooks_reports_nothing(tmp_path: Path) -> None:
    runtime = Runtime.build(standalone_settings(tmp_path, demo=True))
    runtime.start()
    try:
        outcome = runtime.scheduling.filter(pod_json("web", mem=20000), NODES)
        assert outcome.feasible == ["demo-a100-1"]
    finally:
        runtime.stop()
