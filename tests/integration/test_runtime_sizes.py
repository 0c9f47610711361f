"""The runtime sizes its bind workers and its store pool as the settings say."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.support.server import standalone_settings
from vgpu_extender.services.runtime import Runtime


def test_bind_workers_and_the_store_pool_follow_the_settings(tmp_path: Path) -> None:
    runtime = Runtime.build(standalone_settings(tmp_path, bind_workers=3, database_pool_size=7))
    try:
        running, most = 0, 0
        lock = threading.Lock()

        def bind() -> None:
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
            time.sleep(0.05)
            with lock:
                running -= 1

        for future in [runtime.binds.submit(bind) for _ in range(8)]:
            future.result(timeout=10)
        assert most == 3
        connections = [runtime.engine.connect() for _ in range(7)]
        for connection in connections:
            connection.close()
        assert runtime.engine.pool.checkedin() == 7
    finally:
        runtime.stop()
