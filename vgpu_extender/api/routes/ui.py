"""The pages a browser reads: the dashboard (``/ui``) and the API docs (``/docs``).

Both are served from files shipped with Python packages, never from a CDN: GPU
clusters are often air-gapped, and a page that fetches its script from the internet
is blank there. The dashboard is plain ES modules and one stylesheet under
``vgpu_extender/api/ui/`` (no build step); it reads the admin API with the token the
user types in, so these routes serve only static files and need no guard of their own.
Swagger UI's files come from the ``swagger_ui_bundle`` module; it must be Swagger UI
5 (PyPI's ``swagger-ui-bundle-v2``), as 4.x (``swagger-ui-bundle`` 1.x) cannot read the
OpenAPI 3.1 that FastAPI writes.

Only the files named here are served: a fixed table, not a directory, so no path a
client sends can reach another file.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from pathlib import Path

import swagger_ui_bundle
from fastapi import APIRouter, FastAPI, HTTPException, status
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
SWAGGER_DIR = Path(swagger_ui_bundle.swagger_ui_path)

#: The dashboard's files, by the name the page asks for, with their media types.
_JS = "text/javascript; charset=utf-8"
UI_FILES = {
    "app.js": _JS,
    "api.js": _JS,
    "dom.js": _JS,
    "cluster.js": _JS,
    "whatif.js": _JS,
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
#: Swagger UI's files that ``/docs`` refers to.
SWAGGER_FILES = {
    "swagger-ui-bundle.js": _JS,
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
DOCS_ASSETS = "/docs/assets"

#: The dashboard loads nothing but its own files and talks only to its own origin;
#: no inline script or style, no frames, no plugins.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_UI_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated each time (the ETag makes that cheap), so an upgrade shows at once.
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


def _file(directory: Path, table: dict[str, str], name: str) -> FileResponse:
    media_type = table.get(name)
    if media_type is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    return FileResponse(directory / name, media_type=media_type, headers=_UI_HEADERS)


@router.get("/ui")
async def dashboard() -> FileResponse:
    """The dashboard: nodes, devices, allocations, the summary and a what-if form."""
    return FileResponse(UI_DIR / "index.html", media_type="text/html", headers=_UI_HEADERS)


@router.get("/ui/{name}")
async def dashboard_file(name: str) -> FileResponse:
    return _file(UI_DIR, UI_FILES, name)


@router.get(DOCS_ASSETS + "/{name}")
async def docs_file(name: str) -> FileResponse:
    return _file(SWAGGER_DIR, SWAGGER_FILES, name)


def install_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI on the app's schema, every file it loads served locally.

    The app must be built with ``docs_url=None`` (FastAPI's own page loads Swagger UI
    from a CDN).
    """
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} - API docs"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )
