"""Take the README's picture of the dashboard: ``python -m tests.browser.screenshot
[OUT.png]`` (default ``docs/images/ui.png``).

The cluster of the browser tests (``tests.browser.cluster``), one GPU cordoned, a
what-if answered, in the system's Chromium (as ``conftest.chromium_path`` finds it).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.browser.cluster import TOKEN, start_cluster
from tests.browser.conftest import chromium_path
from tests.support.server import pod_json

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "docs" / "images" / "ui.png"


def main(out: Path) -> None:
    executable = chromium_path()
    if executable is None:
        raise SystemExit("no Chromium found: set VGPU_TEST_CHROMIUM")
    with tempfile.TemporaryDirectory() as tmp:
        running = start_cluster(Path(tmp), open_reads=True)
        try:
            assert running.client.post("/api/v1/devices/GPU-gpu-a100-1-3/cordon").status_code == 200
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=executable, args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{running.url}/ui")
                page.fill("#token", TOKEN)
                page.click("#token-save")
                expect(page.locator("button.action").first).to_be_visible()
                page.fill("#whatif-pod", json.dumps(pod_json("big", mem=70000), indent=1))
                page.click("#whatif-submit")
                expect(page.locator("#whatif-result table.rejected")).to_be_visible()
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), full_page=True)
                browser.close()
        finally:
            running.stop()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
