"""The pages a browser reads, over real HTTP: ``/docs`` and ``/ui`` load nothing from
outside the extender (air-gapped clusters), and every file they refer to answers.

What the dashboard shows is tested in a real browser (``tests/browser``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

import pytest

from tests.support.server import RunningExtender, StartExtender, args, pod_json
from vgpu_extender.api.listeners import Surface, surface_of
from vgpu_extender.api.routes.ui import SWAGGER_DIR


class _References(HTMLParser):
    """Every URL a page loads or links to: src, href."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.urls.append(value)


def _references(html: str) -> list[str]:
    parser = _References()
    parser.feed(html)
    return parser.urls


def _assert_local(urls: list[str]) -> None:
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url


@pytest.fixture
def running(extender: StartExtender) -> RunningExtender:
    return extender(demo=True)


# --------------------------------------------------------------------------- /docs
def test_docs_load_only_local_files_and_each_answers(running: RunningExtender) -> None:
    page = running.client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "http://" not in page.text and "https://" not in page.text
    urls = _references(page.text)
    assert any(url.endswith(".js") for url in urls) and any(url.endswith(".css") for url in urls)
    _assert_local(urls)
    for url in urls:
        asset = running.client.get(url)
        assert asset.status_code == 200, url
        # Swagger UI's own file, from the package, not an error page.
        assert asset.content == (SWAGGER_DIR / url.rsplit("/", 1)[1]).read_bytes(), url
    # The schema Swagger UI is pointed at answers too.
    assert re.search(r"url: '/openapi.json'", page.text)
    assert running.client.get("/openapi.json").status_code == 200


def test_docs_serve_only_the_files_they_name(running: RunningExtender) -> None:
    assert running.client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
    for path in (
        "/docs/assets/index.html",
        "/docs/assets/swagger-initializer.js",  # points at the petstore example
        "/docs/assets/..%2F..%2F__init__.py",
        "/ui/..%2Froutes%2Fui.py",
    ):
        assert running.client.get(path).status_code == 404, path


def test_redoc_is_not_served_since_it_loads_from_a_cdn(running: RunningExtender) -> None:
    assert running.client.get("/redoc").status_code == 404


# --------------------------------------------------------------------------- /noop
def test_noop_is_left_out_of_the_schema_and_still_answers(running: RunningExtender) -> None:
    paths = running.client.get("/openapi.json").json()["paths"]
    assert "/noop" not in paths
    assert {"/filter", "/prioritize", "/bind", "/api/v1/nodes"} <= set(paths)
    assert not any(path.startswith(("/ui", "/docs")) for path in paths)
    answer = running.verb("/noop", args(pod_json("huge", mem=100_000), ["demo-t4-1"]))
    assert answer["NodeNames"] == ["demo-t4-1"]


# --------------------------------------------------------------------------- /ui
def test_ui_page_is_local_only_under_a_strict_policy(running: RunningExtender) -> None:
    page = running.client.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "http://" not in page.text and "https://" not in page.text
    urls = _references(page.text)
    _assert_local(urls)
    for url in urls:
        assert running.client.get(url).status_code == 200, url


def test_every_module_the_ui_imports_is_served_as_javascript(running: RunningExtender) -> None:
    """Follow the ES module imports from app.js: a module left out of the served files
    would leave the page blank."""
    pending, seen = ["/ui/app.js"], set()
    while pending:
        url = pending.pop()
        if url in seen:
            continue
        seen.add(url)
        module = running.client.get(url)
        assert module.status_code == 200, url
        assert module.headers["content-type"].startswith("text/javascript"), url
        for target in re.findall(r"""^import .* from ["']([^"']+)["'];""", module.text, re.M):
            assert target.startswith("./"), (url, target)  # nothing from outside
            pending.append(urljoin(url, target))
    assert {"/ui/app.js", "/ui/api.js", "/ui/cluster.js"} <= seen


def test_ui_unknown_file_is_404(running: RunningExtender) -> None:
    assert running.client.get("/ui/missing.js").status_code == 404


@pytest.mark.parametrize("path", ["/ui", "/ui/app.js", "/docs", "/docs/assets/swagger-ui.css"])
def test_pages_move_with_the_admin_api(path: str) -> None:
    # With VGPU_ADMIN_PORT set, they are served on the admin port, not the verbs port.
    assert surface_of(path) is Surface.ADMIN
