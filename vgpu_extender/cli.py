"""``vgpu-extender``: the extender's command line.

Every setting comes from the environment (``VGPU_*``, see ``settings.py``); the flags
below override the common ones.

  vgpu-extender serve --demo            # sample inventory, no cluster, 127.0.0.1:8888
  vgpu-extender serve --inventory nodes.yaml
  vgpu-extender migrate                 # bring the database schema up to date
  vgpu-extender inspect [NODE]          # GPUs, their use and pods, from the store

A setting, an inventory file or a database the extender cannot start with is reported
in one line (``error: VGPU_... (--flag): problem (got value); what to do``) with exit
status 2; ``--log-level debug`` adds the traceback. Nothing heavy (the web framework,
the store, numpy) is imported before a command needs it: ``--help`` and ``--version``
stay fast.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from vgpu_extender.startup_errors import StartupError, describe, env_var, unknown_variables

if TYPE_CHECKING:
    import socket

    # typer carries its own copy of click.
    from typer._click.core import Command as ClickCommand

    from vgpu_extender.serving import ServingLimits
    from vgpu_extender.settings import Settings

PROG = "vgpu-extender"

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # click's plain help: no type tags, and no rich import for --help.
    rich_markup_mode=None,
    help="kube-scheduler extender sharing GPUs by virtual slices (settings: VGPU_* env).",
)

#: ``serve``'s flag for each setting it has one for, as the error lines name them.
SERVE_FLAGS = {
    "host": "--host",
    "port": "--port",
    "demo": "--demo",
    "inventory_file": "--inventory",
    "database_url": "--database-url",
    "node_policy": "--node-policy",
    "device_policy": "--device-policy",
    "kubeconfig": "--kubeconfig",
    "kube_mode": "--standalone",
    "log_level": "--log-level",
    "log_format": "--log-format",
}
MIGRATE_FLAGS = {"database_url": "--database-url"}

#: The defaults ``--help`` shows (the settings' own, asserted equal by a test: the
#: flags default to None so that the environment wins, and importing the settings
#: here would cost ``--help`` a fifth of a second).
SHOWN_DEFAULTS = {
    "host": "127.0.0.1",
    "port": "8888",
    "database_url": "sqlite:///vgpu-extender.db",
    "node_policy": "binpack",
    "device_policy": "spread",
    "log_level": "info",
    "log_format": "text",
}


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PROG)
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {package_version()}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """kube-scheduler extender sharing GPUs by virtual slices (settings: VGPU_* env)."""


# ------------------------------------------------------------------ start-up errors
def fail(
    errors: Sequence[StartupError], *, debug: bool, cause: BaseException | None = None
) -> NoReturn:
    """Print each error as its line on stderr (after the traceback at debug) and exit 2."""
    if debug and cause is not None:
        from vgpu_extender.redaction import hide_passwords

        text = "".join(traceback.format_exception(cause))
        typer.echo(hide_passwords(text).rstrip("\n"), err=True)
    for error in errors:
        typer.echo(error.line(), err=True)
    raise typer.Exit(2)


def wants_debug(flag: str | None) -> bool:
    """Whether the traceback is wanted: known before the settings are (they may fail)."""
    given = flag if flag is not None else os.environ.get(env_var("log_level"), "")
    return given.strip().lower() == "debug"


def build_settings(
    overrides: Mapping[str, Any], flags: Mapping[str, str], *, debug: bool = False
) -> Settings:
    """Environment first, flags (those not None) on top; a bad value exits with one
    line per failing setting, naming its variable and flag."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from vgpu_extender.settings import Settings
    from vgpu_extender.startup_errors import from_settings_error, from_validation

    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        errors = from_validation(exc, list(Settings.model_fields))
        fail([error.with_flags(flags) for error in errors], debug=debug, cause=exc)
    except SettingsError as exc:
        fail([from_settings_error(exc).with_flags(flags)], debug=debug, cause=exc)


def load_settings(overrides: dict[str, Any]) -> Settings:
    """Environment first, flags on top; a bad value exits with the field named."""
    return build_settings(overrides, {key: f"--{key.replace('_', '-')}" for key in overrides})


@contextmanager
def startup(flags: Mapping[str, str], *, debug: bool, settings: Any = None) -> Iterator[None]:
    """Known start-up failures inside leave as their one line and exit status 2."""
    try:
        yield
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as exc:
        fail([describe(exc, settings).with_flags(flags)], debug=debug, cause=exc)


_DEMO_HELP = "Standalone with a built-in sample inventory. [env: VGPU_DEMO] [default: no-demo]"


def _option(
    help_text: str, setting: str | None = None, *, flags: tuple[str, ...] = (), **extra: Any
) -> Any:
    """A flag whose help names its variable and shows the setting's default; ``flags``:
    its names where there are several (the first is the one errors name)."""
    if setting is not None:
        help_text = f"{help_text} [env: {env_var(setting)}]"
        if setting in SHOWN_DEFAULTS:
            help_text += f" [default: {SHOWN_DEFAULTS[setting]}]"
    return typer.Option(*flags, help=help_text, **extra)


# ------------------------------------------------------------------ commands
@app.command()
def serve(
    host: Annotated[str | None, _option("Address to listen on.", "host")] = None,
    port: Annotated[int | None, _option("Port to listen on.", "port")] = None,
    demo: Annotated[
        bool | None,
        typer.Option("--demo/--no-demo", help=_DEMO_HELP),
    ] = None,
    inventory: Annotated[
        Path | None, _option("Standalone inventory file (JSON or YAML).", "inventory_file")
    ] = None,
    database_url: Annotated[
        str | None, _option("sqlite:///FILE or postgresql+psycopg://...", "database_url")
    ] = None,
    node_policy: Annotated[
        str | None,
        _option(
            "Node policy (binpack, spread...); HAMi's flag name is taken too.",
            "node_policy",
            flags=("--node-policy", "--node-scheduler-policy"),
        ),
    ] = None,
    device_policy: Annotated[
        str | None,
        _option(
            "Device policy; HAMi's flag name is taken too.",
            "device_policy",
            flags=("--device-policy", "--gpu-scheduler-policy"),
        ),
    ] = None,
    kubeconfig: Annotated[Path | None, _option("Kubeconfig file.", "kubeconfig")] = None,
    standalone: Annotated[
        bool,
        typer.Option(help="Do not look for a cluster even if a kubeconfig exists."),
    ] = False,
    log_level: Annotated[
        str | None, _option("debug, info, warning, error or critical.", "log_level")
    ] = None,
    log_format: Annotated[
        str | None, _option("text, or json (one object per line).", "log_format")
    ] = None,
) -> None:
    """Serve the extender verbs (filter, prioritize, bind, preempt) over HTTP."""
    debug = wants_debug(log_level)
    warn_unknown_variables(log_level, log_format)
    settings = build_settings(
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
            "log_level": log_level,
            "log_format": log_format,
        },
        SERVE_FLAGS,
        debug=debug,
    )
    debug = settings.log_level == "DEBUG"
    from vgpu_extender import log_format as logs

    logs.configure(settings.log_level, settings.log_format)
    with startup(SERVE_FLAGS, debug=debug, settings=settings):
        check_inputs(settings)
        guard, run = prepare(settings)
    try:
        run()
    except SystemExit:
        if guard.error is None:
            raise
    if guard.error is not None:  # the lifespan failed: uvicorn exited, said nothing
        error = describe(guard.error, settings).with_flags(SERVE_FLAGS)
        fail([error], debug=debug, cause=guard.error)


def early_logging(level: str | None, fmt: str | None) -> None:
    """Logging before the settings are read (for the warnings about them): the flag's
    or the variable's level and format where they parse, else the defaults."""
    from vgpu_extender import log_format as logs

    def pick(flag: str | None, name: str, parse: Callable[[str], str], default: str) -> str:
        given = flag if flag is not None else os.environ.get(env_var(name))
        try:
            return parse(given) if given else default
        except ValueError:
            return default

    chosen_format = pick(fmt, "log_format", logs.parse_format, "text")
    logs.configure(
        pick(level, "log_level", logs.parse_level, "INFO"),
        "json" if chosen_format == "json" else "text",
    )


def warn_unknown_variables(
    level: str | None, fmt: str | None, environ: Mapping[str, str] | None = None
) -> None:
    """One warning per ``VGPU_*`` variable that is no setting (a typo is otherwise
    silently ignored), naming the closest setting; logged before the settings are
    read, since a typo may be why they fail."""
    import logging

    from vgpu_extender.settings import Settings

    known = list(Settings.model_fields)
    unknown = unknown_variables(environ if environ is not None else os.environ, known)
    if not unknown:
        return
    early_logging(level, fmt)
    log = logging.getLogger("vgpu_extender")
    for name, closest in unknown:
        if closest:
            log.warning("%s is not a setting and is ignored; did you mean %s?", name, closest)
        else:
            log.warning("%s is not a setting and is ignored", name)


def check_inputs(settings: Settings) -> None:
    """What can be checked before the server starts: the vendor and its options, and
    the inventory file (read again by the runtime: a file is small)."""
    from vgpu_extender.startup_errors import vendor_error
    from vgpu_extender.vendors import create_vendor_set

    try:
        vendor = create_vendor_set(settings.vendor, settings.vendor_config)
    except (ValueError, TypeError) as exc:
        raise vendor_error(exc) from exc
    if settings.inventory_file is not None:
        from vgpu_extender.services.inventory import load_inventory_file

        load_inventory_file(settings.inventory_file, vendor, split_count=settings.split_count)


def prepare(settings: Settings) -> tuple[LifespanGuard, Callable[[], None]]:
    """The app (in its guard) and the call that serves it until the process stops."""
    import functools
    import logging

    from vgpu_extender import tls_reload
    from vgpu_extender.api import create_app
    from vgpu_extender.redaction import shown_url

    logging.getLogger("vgpu_extender").info("store: %s", shown_url(settings.database_url))
    ssl: dict[str, Any] = {}
    if settings.tls_cert is not None and settings.tls_key is not None:
        ssl = {"ssl_certfile": str(settings.tls_cert), "ssl_keyfile": str(settings.tls_key)}
    limits = serving_limits(settings)
    sockets = listen(settings)
    guard = LifespanGuard(create_app(settings, freeze_gc=True))
    # uvicorn.run's, with the certificate reloaded when its files change.
    run = functools.partial(
        tls_reload.run,
        guard,
        interval_s=settings.tls_reload_interval_s,
        sockets=sockets,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        # Our root logger's handler and format (log_format.configure) for its lines too.
        log_config=None,
        access_log=False,
        # kube-scheduler calls the extender directly: no proxy's headers to trust, and
        # the loopback-only check must see the real peer.
        proxy_headers=False,
        **limits.uvicorn_options(),
        **ssl,
    )
    return guard, run


class LifespanGuard:
    """The app, except that a start-up failure is kept for the CLI to report in one
    line instead of uvicorn logging its traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.error: BaseException | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Any) -> None:
            if message["type"] == "lifespan.startup.failed":
                # Sent from inside the handler of the failure: that exception is current.
                self.error = _leaf(sys.exc_info()[1]) or RuntimeError(str(message.get("message")))
                message = {**message, "message": ""}
            await send(message)

        await self.app(scope, receive, guarded)


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The first real error inside (task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def listen(settings: Settings) -> list[socket.socket]:
    """A bound socket per listener (the main port, and the admin and metrics ports
    when set: ``api/listeners.py``); one that cannot be had exits, naming it."""
    import logging

    from vgpu_extender.api.listeners import bind_sockets

    try:
        bound = bind_sockets(settings)
    except OSError as exc:
        raise StartupError(
            f"cannot listen: {exc}",
            "stop what holds the port, or choose another",
            ("port", "admin_port", "metrics_port"),
        ) from exc
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
        raise StartupError(
            str(exc),
            "lower the caps or raise the open-file limit (ulimit -n)",
            ("max_connections",),
        ) from exc


@app.command()
def migrate(
    database_url: Annotated[
        str | None, _option("sqlite:///FILE or postgresql+psycopg://...", "database_url")
    ] = None,
) -> None:
    """Apply the database migrations (also done on every start)."""
    from vgpu_extender import store
    from vgpu_extender.redaction import hide_passwords

    warn_unknown_variables(None, None)
    settings = build_settings({"database_url": database_url}, MIGRATE_FLAGS)
    try:
        store.migrate(settings.database_url)
        revision = store.schema_revision(settings.database_url)
    except store.StoreError as exc:
        typer.echo(f"migrate failed: {hide_passwords(str(exc))}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"database at revision {revision}")


def _inspect_command() -> None:
    from vgpu_extender import inspect_cli

    app.command("inspect")(inspect_cli.inspect)


_inspect_command()


def _register_plugins(target: typer.Typer) -> None:
    """Commands contributed by optional modules (the trace simulator)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("vgpu_extender.sim.command") is not None:
        module = importlib.import_module("vgpu_extender.sim.command")
        module.register(target)


def _no_type(ctx: object) -> None:
    return None


def command() -> ClickCommand:
    """The click command behind ``app``, with ``--version`` on every subcommand and no
    type tags (``TEXT``, ``INTEGER``) in the help: the help text says what to give."""
    import copy

    from typer.core import TyperArgument, TyperOption
    from typer.main import get_command

    group = get_command(app)
    subcommands: dict[str, ClickCommand] = getattr(group, "commands", {})
    for sub in [group, *subcommands.values()]:
        for param in sub.params:
            if isinstance(param, TyperOption):
                param.metavar = ""
            elif isinstance(param, TyperArgument):
                # An argument's name stays in the usage line; only its tag goes.
                setattr(param, "display_type_rich", _no_type)  # noqa: B010
        if sub is not group:
            # The root's own --version, its value kept out of the command's arguments.
            version = copy.copy(next(p for p in group.params if p.name == "version"))
            version.expose_value = False
            sub.params.append(version)
    return group


def main(argv: Sequence[str] | None = None) -> None:
    _register_plugins(app)
    command()(args=argv, prog_name=PROG)


if __name__ == "__main__":
    main()
