"""The serving process keeps its start-up objects out of the collector's full passes.

A full collection walks every object the process holds with every thread stopped;
``vgpu-extender serve`` freezes what is alive once the runtime has started (the
libraries, the index), so those passes walk only what came after.
"""

from __future__ import annotations

import gc
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import (
    StartExtender,
    serve,
    spawn_extender,
    standalone_settings,
)
from vgpu_extender.api import create_app

FROZEN = "vgpu_extender_gc_frozen_objects"
# Far fewer than the modules and classes any serving process holds at start.
MANY = 10_000


def _frozen_gauge(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == FROZEN:
                return sample.value
    raise AssertionError(f"{FROZEN} not exposed")


def test_an_app_frozen_at_start_unfreezes_when_it_stops(tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0
    running = serve(create_app(standalone_settings(tmp_path), freeze_gc=True))
    try:
        frozen = gc.get_freeze_count()
        assert frozen > MANY
        # The gauge holds the count the freeze made: objects freed since (by reference
        # count) have left the frozen ones, and none can have joined them.
        assert _frozen_gauge(running.client.get("/metrics").text) >= frozen
    finally:
        running.stop()
    assert gc.get_freeze_count() == 0


def test_an_embedded_app_leaves_the_collector_alone(extender: StartExtender) -> None:
    running = extender()
    assert gc.get_freeze_count() == 0
    assert _frozen_gauge(running.client.get("/metrics").text) == 0


def test_serve_freezes_its_start_up_objects(tmp_path: Path) -> None:
    process = spawn_extender(
        env={
            "VGPU_KUBE_MODE": "off",
            "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'extender.db'}",
        },
        log=tmp_path / "extender.log",
    )
    try:
        metrics = process.client.get("/metrics")
        assert metrics.status_code == 200
        assert _frozen_gauge(metrics.text) > MANY
    finally:
        process.stop()
