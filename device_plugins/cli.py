"""``vgpu-device-plugin``: the node agent's command line.

Every setting comes from the environment (``VGPU_DP_*``, see docs/node-agent.md); the
flags below override the common ones. ``--dry-run`` discovers, prints the devices
and the node annotation it would write, and exits without touching kubelet or the
cluster.
"""

from __future__ import annotations

import logging
import signal
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer

from device_plugins.agent import AgentStartError, DevicePluginAgent, splitting_from
from device_plugins.ascend.agent import backend_for, build_agent
from device_plugins.ascend.agent import describe as describe_ascend
from device_plugins.ascend.settings import AscendSettings
from device_plugins.ascend.startup import ascend_settings
from device_plugins.discovery import DiscoveryBackend, DiscoveryError, make_backend
from device_plugins.inventory import register_annotation, to_devices
from device_plugins.kube import KubeAccessError, KubernetesGateway
from device_plugins.settings import DevicePluginSettings
from device_plugins.startup import StartupError, check_files, settings_from, where
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

PROG = "vgpu-device-plugin"
#: Exit status for settings and start-up problems (click's own for usage errors).
EXIT_SETTINGS = 2
EXIT_FAILED = 1

app = typer.Typer(
    add_completion=False,
    help=__doc__,
    # Plain click help: options with their defaults, and no TEXT/INTEGER type tags.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"max_content_width": 100},
)
log = logging.getLogger(__name__)


def version() -> str:
    try:
        return metadata.version("vgpu-extender")
    except metadata.PackageNotFoundError:  # run from a source tree
        from vgpu_extender import __version__

        return __version__


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {version()}")
        raise typer.Exit()


def _setting(field: str, text: str) -> Any:
    """A flag overriding ``field``: its help names the variable and the default."""
    info = DevicePluginSettings.model_fields[field]
    default = info.default
    shown = "none" if default is None or default == "" else str(default)
    return typer.Option(
        help=f"{text} Env {where(field, ())}. [default: {shown}]",
        show_default=False,
        metavar=" ",
    )


#: The settings that have a flag; the others are environment variables only.
FLAGS = (
    "node_name",
    "resource_name",
    "device_plugin_dir",
    "socket_name",
    "discovery",
    "static_file",
    "split_count",
    "memory_scaling",
    "core_scaling",
    "hook_path",
    "kubeconfig",
    "metrics_address",
    "log_level",
)


def describe(backend: DiscoveryBackend, settings: DevicePluginSettings) -> str:
    """What ``--dry-run`` prints: one line per device, then the annotation."""
    physical = backend.discover()
    devices = to_devices(physical, splitting_from(settings))
    lines = [f"backend {backend.name}: {len(physical)} device(s)"]
    for raw, device in zip(physical, devices, strict=True):
        lines.append(
            f"  #{raw.index} {raw.uuid} {raw.model} {raw.memory_mib} MiB "
            f"numa={'-' if raw.numa is None else raw.numa} mode={raw.mode} "
            f"{'healthy' if raw.healthy else 'UNHEALTHY'} -> split {device.count}, "
            f"devmem {device.memory_mib} MiB, devcore {device.cores}"
        )
    key = NvidiaConfig().register_annotation
    lines.append(f"{key}={register_annotation(physical, splitting_from(settings))}")
    return "\n".join(lines)


def _fail(message: str, status: int) -> typer.Exit:
    typer.echo(f"{PROG}: {message}", err=True)
    return typer.Exit(status)


@app.command(options_metavar="[OPTIONS]")
def run(
    node_name: Annotated[str | None, _setting("node_name", "This node's name.")] = None,
    resource_name: Annotated[
        str | None, _setting("resource_name", "Extended resource to register.")
    ] = None,
    device_plugin_dir: Annotated[
        Path | None, _setting("device_plugin_dir", "Kubelet's device-plugins folder.")
    ] = None,
    socket_name: Annotated[str | None, _setting("socket_name", "Our socket's file name.")] = None,
    discovery: Annotated[
        str | None, _setting("discovery", "nvml or static (NVIDIA); npu-smi or ascend-static.")
    ] = None,
    static_file: Annotated[
        Path | None, _setting("static_file", "Device file for 'static' discovery.")
    ] = None,
    split_count: Annotated[int | None, _setting("split_count", "Allocations per GPU.")] = None,
    memory_scaling: Annotated[
        float | None, _setting("memory_scaling", "Memory over-subscription.")
    ] = None,
    core_scaling: Annotated[
        float | None, _setting("core_scaling", "Core over-subscription.")
    ] = None,
    hook_path: Annotated[
        Path | None, _setting("hook_path", "Where HAMi-core is on the host.")
    ] = None,
    kubeconfig: Annotated[
        Path | None, _setting("kubeconfig", "Kubeconfig outside a cluster.")
    ] = None,
    metrics_address: Annotated[
        str | None, _setting("metrics_address", "host:port of /metrics and the probes, or off.")
    ] = None,
    log_level: Annotated[
        str | None, _setting("log_level", "DEBUG, INFO, WARNING or ERROR.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print discovery and the annotation, then exit.")
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            is_eager=True,
            callback=_show_version,
        ),
    ] = False,
) -> None:
    """Run the device plugin (or, with --dry-run, show what it would register)."""
    overrides = {
        "node_name": node_name,
        "resource_name": resource_name,
        "device_plugin_dir": device_plugin_dir,
        "socket_name": socket_name,
        "discovery": discovery,
        "static_file": static_file,
        "split_count": split_count,
        "memory_scaling": memory_scaling,
        "core_scaling": core_scaling,
        "hook_path": hook_path,
        "kubeconfig": kubeconfig,
        "metrics_address": metrics_address,
        "log_level": log_level,
    }
    try:
        settings = settings_from(overrides, FLAGS)
        check_files(settings, FLAGS)
        ascend = ascend_settings(settings, FLAGS) if settings.vendor == "ascend" else None
    except StartupError as exc:
        raise _fail(str(exc), EXIT_SETTINGS) from None
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if ascend is not None:
        _run_ascend(settings, ascend, dry_run=dry_run)
        return
    backend = make_backend(settings)
    if dry_run:
        try:
            typer.echo(describe(backend, settings))
        except DiscoveryError as exc:
            raise _fail(f"discovery failed: {exc}", EXIT_FAILED) from None
        finally:
            backend.close()
        return
    if not settings.node_name:
        raise _fail(f"node name missing: set {where('node_name', FLAGS)}", EXIT_SETTINGS)
    try:
        gateway = KubernetesGateway.from_config(settings.kubeconfig)
    except KubeAccessError as exc:
        raise _fail(f"{exc}; fix {where('kubeconfig', FLAGS)}", EXIT_SETTINGS) from None
    _serve(DevicePluginAgent(settings, backend=backend, gateway=gateway), settings)


def _run_ascend(settings: DevicePluginSettings, ascend: AscendSettings, *, dry_run: bool) -> None:
    """The Ascend flavour: the chip is known once the node's chips are listed."""
    if not dry_run and not settings.node_name:
        raise _fail(f"node name missing: set {where('node_name', FLAGS)}", EXIT_SETTINGS)
    try:
        backend, flavour = backend_for(settings, ascend)
        if dry_run:
            typer.echo(describe_ascend(backend, flavour, settings))
            return
    except DiscoveryError as exc:
        raise _fail(f"discovery failed: {exc}", EXIT_FAILED) from None
    try:
        gateway = KubernetesGateway.from_config(settings.kubeconfig)
    except KubeAccessError as exc:
        raise _fail(f"{exc}; fix {where('kubeconfig', FLAGS)}", EXIT_SETTINGS) from None
    agent = build_agent(settings, ascend, gateway=gateway, backend=backend, flavour=flavour)
    _serve(agent, agent.settings)


def _serve(agent: DevicePluginAgent, settings: DevicePluginSettings) -> None:
    def on_signal(signum: int, frame: object) -> None:
        log.info("signal %d: stopping", signum)
        agent.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        agent.run()
    except AgentStartError as exc:
        raise _fail(str(exc), EXIT_SETTINGS) from None
    except DiscoveryError as exc:
        raise _fail(f"discovery failed: {exc}", EXIT_FAILED) from None
    except Exception as exc:
        # One line for the Pod's status; the traceback only when asked for.
        if settings.log_level == "DEBUG":
            log.exception("the agent stopped")
        raise _fail(
            f"stopped by an unexpected error: {type(exc).__name__}: {exc} "
            "(--log-level DEBUG shows the traceback)",
            EXIT_FAILED,
        ) from None


def main() -> None:
    """Console-script entry point."""
    app(prog_name=PROG)
