"""Offline, as on an air-gapped cluster: /ui and /docs work with every request to
anywhere but the extender refused, and load nothing from elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import ConsoleMessage, Page, Route, expect

from tests.support.server import RunningExtender, place, pod_json
from vgpu_extender.api.routes.ui import SWAGGER_DIR


@dataclass
class Offline:
    """What the page tried beyond the extender, and what went wrong in it."""

    outside: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def offline(page: Page, cluster: RunningExtender) -> Iterator[Offline]:
    seen = Offline()
    local = urlsplit(cluster.url).netloc

    def gate(route: Route) -> None:
        if urlsplit(route.request.url).netloc == local:
            route.continue_()
        else:
            seen.outside.append(route.request.url)
            route.abort()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.errors.append(message.text)  # CSP violations are reported here

    page.route("**/*", gate)
    page.on("console", console)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    yield seen


def test_the_dashboard_loads_nothing_from_elsewhere_and_breaks_no_rule(
    page: Page, cluster: RunningExtender, offline: Offline
) -> None:
    page.goto(f"{cluster.url}/ui")
    expect(page.locator("#status")).to_contain_text("Updated")
    expect(page.locator("article.device")).to_have_count(8)
    page.click("#whatif-submit")  # the example pod
    expect(page.locator("#whatif-result h3").first).to_be_visible()
    assert offline.outside == []
    assert offline.errors == []


def test_swagger_ui_renders_the_schema_offline(
    page: Page, cluster: RunningExtender, offline: Offline
) -> None:
    openapi = cluster.client.get("/openapi.json").json()["openapi"]
    page.goto(f"{cluster.url}/docs")
    # Swagger UI drew the operations from /openapi.json: it is not a blank page.
    expect(
        page.locator(".swagger-ui .info .title"),
        f"{SWAGGER_DIR.name} did not render the schema (OpenAPI {openapi} needs Swagger UI 5)",
    ).to_contain_text("vgpu-extender")
    expect(page.locator('.opblock[id*="api_v1_nodes"]').first).to_be_visible()
    expect(page.locator(".opblock-summary-path", has_text="/filter").first).to_be_visible()
    assert page.locator(".opblock-summary-path", has_text="/noop").count() == 0
    assert offline.outside == []
    assert offline.errors == []


def test_names_that_look_like_markup_are_shown_as_text(
    page: Page, cluster: RunningExtender, offline: Offline
) -> None:
    # Pod names come from tenants: the page puts them in as text, never as HTML.
    name = '<img src="/x" onerror="window.injected = 1">'
    place(cluster, pod_json(name, uid="uid-markup", mem=1000), "gpu-h100-1")
    page.goto(f"{cluster.url}/ui")
    expect(page.locator("#allocations tbody tr").first).to_be_visible()
    row = page.locator("#allocations tbody tr", has_text=name)
    expect(row).to_have_count(1)
    assert page.locator("#allocations img, #nodes img").count() == 0
    assert page.evaluate("window.injected") is None
    assert offline.errors == []
