"""What the application says about itself: settings, routes, console scripts.

The manifests are checked against these, so a renamed setting, route or port shows
up here rather than in a cluster.
"""

from __future__ import annotations

import importlib
import tomllib
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import ROOT


@cache
def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def console_scripts() -> dict[str, str]:
    return dict(pyproject()["project"]["scripts"])


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            pytest.skip(f"{module} is not there yet")
        raise


def extender_settings_class() -> Any:
    return _import("vgpu_extender.settings").Settings


def device_plugin_settings_class() -> Any:
    return _import("device_plugins.settings").DevicePluginSettings


def settings_fields(cls: Any) -> set[str]:
    return set(cls.model_fields)


def env_prefix(cls: Any) -> str:
    return str(cls.model_config["env_prefix"])


@cache
def _extender_client() -> Any:
    """The app ``create_app`` builds, behind a test client that never runs its lifespan."""
    app_module = _import("vgpu_extender.api.app")
    settings = extender_settings_class()(
        kube_mode="off", database_url="sqlite://", migrate_on_start=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        testclient = importlib.import_module("fastapi.testclient")
    return testclient.TestClient(app_module.create_app(settings), raise_server_exceptions=False)


def serves(method: str, path: str) -> bool:
    """Whether the app routes ``method path`` to a handler (not a 404 or 405 of the router).

    The handlers run without the runtime the lifespan would build, so their answer
    does not matter here; only the router's does.
    """
    response = _extender_client().request(method, path, content=b"{}")
    router_miss = response.status_code in (404, 405) and response.json() in (
        {"detail": "Not Found"},
        {"detail": "Method Not Allowed"},
    )
    return not router_miss


def typer_command(script: str) -> Any:
    """The click command behind a console script (``module:function``)."""
    target = console_scripts()[script]
    module_name, _, _function = target.partition(":")
    module = _import(module_name)
    typer = importlib.import_module("typer")
    return typer.main.get_command(module.app)


def parse_cli(script: str, args: list[str]) -> dict[str, Any]:
    """Parse ``args`` as the console script would; the chosen command's parameters."""
    command = typer_command(script)
    commands = getattr(command, "commands", None)
    if commands:  # a group: the first argument names the command
        assert args and args[0] in commands, f"{script} has no command {args[:1]}"
        context = commands[args[0]].make_context(args[0], list(args[1:]))
        params: dict[str, Any] = {"__command__": args[0], **context.params}
    else:
        params = dict(command.make_context(script, list(args)).params)
    return params


def module_path(module: str) -> Path:
    return Path(_import(module).__file__)
