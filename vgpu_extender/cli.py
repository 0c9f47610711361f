"""``vgpu-extender``: the extender's command line.

Every setting comes from the environment (``VGPU_*``, see ``settings.py``); the flags
below override the common ones.

  vgpu-extender serve --demo            # sample inventory, no cluster, 127.0.0.1:8888
  vgpu-extender serve --inventory nodes.yaml
  vgpu-extender migrate                 # bring the database schema up to date
  vgpu-extender inspect [NODE]          # GPUs, their use and pods, from the store
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vgpu_extender import inspect_cli
from vgpu_extender.redaction import hide_passwords, redact_logging, shown_url
from vgpu_extender.settings import Settings
from vgpu_extender.settings_cli import settings_or_exit

if TYPE_CHECKING:
    from vgpu_extender.serving import ServingLimits

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="kube-scheduler extender sharing GPUs by virtual slices (settings: VGPU_* env).",
)


def load_settings(overrides: dict[str, Any]) -> Settings:
    """Environment first, flags on top; a bad value exits with the field named."""
    return settings_or_exit(Settings, overrides)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    demo: Annotated[
        bool | None,
        typer.Option("--demo/--no-demo", help="Standalone with a built-in sample inventory."),
    ] = None,
    inventory: Annotated[
        Path | None, typer.Option(help="Standalone inventory file (JSON or YAML).")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="sqlite:///FILE or postgresql+psycopg://...")
    ] = None,
    node_policy: Annotated[
        str | None, typer.Option(help="Node policy (binpack, spread...).")
    ] = None,
    device_policy: Annotated[str | None, typer.Option(help="Device policy.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig file.")] = None,
    standalone: Annotated[
        bool, typer.Option(help="Do not look for a cluster even if a kubeconfig exists.")
    ] = False,
    log_level: Annotated[str | None, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = None,
) -> None:
    """Serve the extender verbs (filter, prioritize, bind, preempt) over HTTP."""
    settings = load_settings(
        {
            "host": host,
            "port": port,
            "demo": demo,
            "inventory_file": inventory,
            "database_url": database_url,
            "node_policy": node_policy,
            "device_policy": device_policy,
            "kubeconfig": kubeconfig,
            "kube_mode": "off" if standalone else None,
            "log_level": log_level.upper() if log_level else None,
        }
    )
    from vgpu_extender import tls_reload
    from vgpu_extender.api import create_app

    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    redact_logging()
    logging.getLogger("vgpu_extender").info("store: %s", shown_url(settings.database_url))
    ssl: dict[str, Any] = {}
    if settings.tls_cert is not None and settings.tls_key is not None:
        ssl = {"ssl_certfile": str(settings.tls_cert), "ssl_keyfile": str(settings.tls_key)}
    limits = serving_limits(settings)
    sockets = listen(settings)
    # uvicorn.run's, with the certificate reloaded when its files change.
    tls_reload.run(
        create_app(settings, freeze_gc=True),
        interval_s=settings.tls_reload_interval_s,
        sockets=sockets,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        # kube-scheduler calls the extender directly: no proxy's headers to trust, and
        # the loopback-only check must see the real peer.
        proxy_headers=False,
        **limits.uvicorn_options(),
        **ssl,
    )


def listen(settings: Settings) -> list[socket.socket]:
    """A bound socket per listener (the main port, and the admin and metrics ports
    when set: ``api/listeners.py``); one that cannot be had exits, naming it."""
    from vgpu_extender.api.listeners import bind_sockets

    try:
        bound = bind_sockets(settings)
    except OSError as exc:
        typer.echo(f"serve: {exc}", err=True)
        raise typer.Exit(2) from None
    log = logging.getLogger("vgpu_extender")
    for listener, sock in bound:
        host, port = sock.getsockname()[:2]
        served = ", ".join(sorted(listener.serves))
        log.info("listening on %s port %d (%s): %s", host, port, listener.name, served)
    return [sock for _listener, sock in bound]


def serving_limits(settings: Settings) -> ServingLimits:
    """The process's connection caps and timeouts; each listener's ``uvicorn.Config``
    takes ``**limits.uvicorn_options()``. Caps that do not fit the file limit exit."""
    from vgpu_extender.serving import LimitError, connection_limits

    try:
        return connection_limits(settings)
    except LimitError as exc:
        typer.echo(f"serve: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def migrate(
    database_url: Annotated[
        str | None, typer.Option(help="sqlite:///FILE or postgresql+psycopg://...")
    ] = None,
) -> None:
    """Apply the database migrations (also done on every start)."""
    from vgpu_extender import store

    settings = load_settings({"database_url": database_url})
    try:
        store.migrate(settings.database_url)
        revision = store.schema_revision(settings.database_url)
    except store.StoreError as exc:
        typer.echo(f"migrate failed: {hide_passwords(str(exc))}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"database at revision {revision}")


app.command("inspect")(inspect_cli.inspect)


def _register_plugins(target: typer.Typer) -> None:
    """Commands contributed by optional modules (the trace simulator)."""
    if importlib.util.find_spec("vgpu_extender.sim.command") is not None:
        module = importlib.import_module("vgpu_extender.sim.command")
        module.register(target)


def main() -> None:
    _register_plugins(app)
    app()


if __name__ == "__main__":
    main()
