"""``vgpu-device-plugin``: the node agent's command line.

Every setting comes from the environment (``VGPU_DP_*``, see ``settings.py``); the
flags below override the common ones. ``--dry-run`` discovers, prints the devices
and the node annotation it would write, and exits without touching kubelet or the
cluster.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from device_plugins.agent import DevicePluginAgent, splitting_from
from device_plugins.discovery import DiscoveryBackend, DiscoveryError, make_backend
from device_plugins.inventory import register_annotation, to_devices
from device_plugins.kube import KubeAccessError, KubernetesGateway
from device_plugins.settings import DevicePluginSettings
from vgpu_extender.settings_cli import settings_or_exit
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

app = typer.Typer(add_completion=False, help=__doc__)


def load_settings(overrides: dict[str, Any]) -> DevicePluginSettings:
    """Environment first, flags on top; a bad value exits with the field named."""
    return settings_or_exit(DevicePluginSettings, overrides)


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


@app.command()
def run(
    node_name: Annotated[str | None, typer.Option(help="This node's name (env NODE_NAME).")] = None,
    resource_name: Annotated[
        str | None, typer.Option(help="Extended resource to register.")
    ] = None,
    device_plugin_dir: Annotated[
        Path | None, typer.Option(help="Kubelet's device-plugins folder.")
    ] = None,
    socket_name: Annotated[str | None, typer.Option(help="Our socket's file name.")] = None,
    discovery: Annotated[str | None, typer.Option(help="nvml or static.")] = None,
    static_file: Annotated[Path | None, typer.Option(help="Device file for 'static'.")] = None,
    split_count: Annotated[int | None, typer.Option(help="Allocations per GPU.")] = None,
    memory_scaling: Annotated[float | None, typer.Option(help="Memory over-subscription.")] = None,
    core_scaling: Annotated[float | None, typer.Option(help="Core over-subscription.")] = None,
    hook_path: Annotated[Path | None, typer.Option(help="Where HAMi-core is on the host.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig outside a cluster.")] = None,
    log_level: Annotated[str | None, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print discovery and the annotation, then exit.")
    ] = False,
) -> None:
    """Run the device plugin (or, with --dry-run, show what it would register)."""
    settings = load_settings(
        {
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
            "log_level": log_level,
        }
    )
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    backend = make_backend(settings)
    if dry_run:
        try:
            typer.echo(describe(backend, settings))
        except DiscoveryError as exc:
            typer.echo(f"discovery failed: {exc}", err=True)
            raise typer.Exit(1) from None
        finally:
            backend.close()
        return
    if not settings.node_name:
        typer.echo("node name missing: set --node-name, VGPU_DP_NODE_NAME or NODE_NAME", err=True)
        raise typer.Exit(2)
    try:
        gateway = KubernetesGateway.from_config(settings.kubeconfig)
    except KubeAccessError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)

    def on_signal(signum: int, frame: object) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        agent.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        agent.run()
    except DiscoveryError as exc:
        typer.echo(f"discovery failed: {exc}", err=True)
        raise typer.Exit(1) from None


def main() -> None:
    """Console-script entry point."""
    app()
