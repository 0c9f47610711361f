"""``vgpu-extender inspect [NODE]``: per node and GPU, memory and cores used / total
and the pods holding them, in the spirit of ``kubectl inspect gpushare``.

It reads the store (``--database-url``, default ``VGPU_DATABASE_URL``), so it works with
no extender running, or asks a running one (``--server URL``) through its admin API.
``--output json`` prints the admin API's node objects (``GET /api/v1/nodes``).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu_extender.redaction import hide_passwords, shown_url

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from vgpu_extender.api.schemas import NodeOut

# The store, the API schemas and httpx are imported where used: `vgpu-extender --help`
# imports this module and must stay fast.


@functools.cache
def _nodes() -> TypeAdapter[list[NodeOut]]:
    from pydantic import TypeAdapter

    from vgpu_extender.api.schemas import NodeOut

    return TypeAdapter(list[NodeOut])


HEADERS = ("NODE", "GPU", "TYPE", "MEMORY(MiB)", "CORES(%)", "PODS/SLOTS", "STATE", "PODS")


class Output(StrEnum):
    table = "table"
    json = "json"


class InspectError(Exception):
    """Why nothing could be shown; the message is printed as is."""


# --------------------------------------------------------------------------- sources
def from_store(database_url: str, node: str | None) -> list[NodeOut]:
    """Reports straight from the store, without a running extender."""
    from vgpu_extender import store
    from vgpu_extender.api.schemas import NodeOut
    from vgpu_extender.services import admin

    try:
        revision = store.schema_revision(database_url)
        if revision is None:
            raise InspectError(
                f"the database at {shown_url(database_url)} holds no vgpu-extender schema; "
                "run `vgpu-extender migrate` or start the extender once"
            )
        engine = store.make_engine(database_url)
        try:
            reports, _pods = admin.stored_reports(store.session_factory(engine), node)
        finally:
            engine.dispose()
    except store.StoreError as exc:
        raise InspectError(f"cannot read the store: {hide_passwords(str(exc))}") from None
    if node is not None and not reports:
        raise InspectError(f"node {node!r} is not registered")
    return [NodeOut.of(report, devices=True) for report in reports]


def from_server(
    server: str,
    node: str | None,
    *,
    verify: bool | ssl.SSLContext = True,
    timeout_s: float = 30.0,
    token: str | None = None,
) -> list[NodeOut]:
    """The same reports from a running extender's admin API (with the bearer token,
    which its reads need when it has one configured)."""
    import httpx
    from pydantic import ValidationError

    path = f"/api/v1/nodes/{node}" if node is not None else "/api/v1/nodes"
    params = {} if node is not None else {"devices": "true"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(
            base_url=server, verify=verify, timeout=timeout_s, headers=headers
        ) as client:
            response = client.get(path, params=params)
    except httpx.HTTPError as exc:
        raise InspectError(f"cannot reach the extender at {server}: {exc}") from None
    if response.status_code == 404 and node is not None:
        raise InspectError(f"node {node!r} is not registered")
    if response.status_code != 200:
        raise InspectError(
            f"the extender at {server} answered {response.status_code}: {response.text[:500]}"
        )
    try:
        payload = response.content if node is None else b"[" + response.content + b"]"
        return _nodes().validate_json(payload)
    except ValidationError as exc:
        raise InspectError(f"the extender at {server} sent an unexpected answer: {exc}") from None


# --------------------------------------------------------------------------- rendering
def render_json(nodes: Sequence[NodeOut]) -> str:
    return _nodes().dump_json(list(nodes), indent=2).decode()


def render_table(nodes: Sequence[NodeOut]) -> str:
    """One line per GPU, grouped by node, and the cluster's totals at the end."""
    rows: list[tuple[str, ...]] = [HEADERS]
    problems: list[str] = []
    for node in nodes:
        if node.problem:
            problems.append(f"{node.name}: {node.problem}")
        devices = node.devices or []
        if not devices:
            rows.append((node.name, "-", "-", "-", "-", "-", "no GPUs", "-"))
        for position, d in enumerate(devices):
            state = ",".join(
                word for word, on in (("unhealthy", not d.healthy), ("cordoned", d.cordoned)) if on
            )
            pods = ",".join(f"{p.namespace}/{p.name}" for p in d.pods) or "-"
            rows.append(
                (
                    node.name if position == 0 else "",
                    str(d.index),
                    d.type,
                    f"{d.memory_used_mib}/{d.memory_mib}",
                    f"{d.cores_used}/{d.cores}",
                    f"{d.slots_used}/{d.slots}",
                    state or "ok",
                    pods,
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS) - 1)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]
    used = sum(n.memory_used_mib for n in nodes)
    total = sum(n.memory_mib for n in nodes)
    cores_used = sum(n.cores_used for n in nodes)
    cores = sum(n.cores for n in nodes)
    lines.append("")
    schedulable = [d for n in nodes for d in n.devices or [] if d.healthy and not d.cordoned]
    free = sum(d.memory_free_mib for d in schedulable)
    fragment = sum(d.fragment_mib for d in schedulable)
    lines.append(
        f"Allocated/Total GPU memory: {used}/{total} MiB ({_percent(used, total)}), "
        f"cores: {cores_used}/{cores} ({_percent(cores_used, cores)}), "
        f"GPUs: {sum(n.gpus for n in nodes)} on {len(nodes)} node(s)"
    )
    lines.append(
        f"Free memory on shared or full GPUs (fragmentation): {fragment}/{free} MiB "
        f"({_percent(fragment, free)})"
    )
    lines.extend(f"Not schedulable: {problem}" for problem in problems)
    return "\n".join(line.rstrip() for line in lines)


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "0%"


# --------------------------------------------------------------------------- command
def inspect(
    node: Annotated[str | None, typer.Argument(help="Only this node.")] = None,
    server: Annotated[
        str | None,
        typer.Option(help="Ask a running extender (e.g. https://127.0.0.1:8888) instead."),
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="The store to read (default: VGPU_DATABASE_URL).")
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="table or json.")] = Output.table,
    ca_file: Annotated[
        Path | None, typer.Option(help="CA certificate that signed the server's certificate.")
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="Do not verify the server's TLS certificate.")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="VGPU_ADMIN_TOKEN",
            show_default=False,
            help="The extender's admin token, for --server (default: VGPU_ADMIN_TOKEN).",
        ),
    ] = None,
) -> None:
    """Per node and GPU: memory and cores used / total, and the pods holding them."""
    try:
        if server is not None:
            verify: bool | ssl.SSLContext = not insecure
            if ca_file is not None and not insecure:
                verify = ssl.create_default_context(cafile=ca_file)
            nodes = from_server(server, node, verify=verify, token=token)
        else:
            from vgpu_extender.cli import load_settings

            settings = load_settings({"database_url": database_url})
            nodes = from_store(settings.database_url, node)
    except InspectError as exc:
        typer.echo(f"inspect: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(render_json(nodes) if output is Output.json else render_table(nodes))
