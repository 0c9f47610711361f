"""The ``vgpu-extender`` console script: the extender extra is checked before the CLI loads.

``pip install vgpu-extender`` installs what the node agent needs; the extender's web
framework, database and NumPy come with the ``extender`` extra. Without them the CLI
would fail at its first import with a traceback; this module runs first, finds the
packages without importing them, and names the one command that installs them.
"""

from __future__ import annotations

import importlib.util
from typing import Any

#: Import name -> distribution, for everything the ``extender`` extra brings.
EXTENDER_MODULES = {
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "httptools": "httptools",
    "sqlalchemy": "sqlalchemy",
    "alembic": "alembic",
    "psycopg": "psycopg",
    "numpy": "numpy",
    "msgspec": "msgspec",
    "swagger_ui_bundle": "swagger-ui-bundle-v2",
}
INSTALL = "pip install 'vgpu-extender[extender]'"


def missing_extender_packages() -> list[str]:
    """The extender extra's distributions that cannot be found (none: all there)."""
    return [dist for module, dist in EXTENDER_MODULES.items() if not _found(module)]


def extender_message(missing: list[str]) -> str:
    """The one line the command prints when packages are missing."""
    return f"vgpu-extender needs the extender extra (missing: {', '.join(missing)}): {INSTALL}"


def require_extender() -> None:
    """Exit with one line naming the install when the extender extra is incomplete."""
    missing = missing_extender_packages()
    if missing:
        raise SystemExit(extender_message(missing))


def main() -> None:
    """The console script: check, then run the CLI."""
    require_extender()
    from vgpu_extender.cli import main as cli_main

    cli_main()


def __getattr__(name: str) -> Any:
    # Tools that read the console script's command (``module.app``) get the CLI's app.
    if name == "app":
        from vgpu_extender.cli import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


if __name__ == "__main__":
    main()
