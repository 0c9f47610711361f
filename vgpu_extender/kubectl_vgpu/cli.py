"""``kubectl-vgpu``: the command line (argparse, standard library only at import).

kubectl runs ``kubectl-vgpu`` from PATH for ``kubectl vgpu ...``. Parsing needs nothing
but argparse; ``httpx``, PyYAML and the kubeconfig reader are imported by the command
that uses them, so ``--help`` and ``--version`` cost a bare interpreter's start.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from vgpu_extender import __version__
from vgpu_extender.kubectl_vgpu.errors import PluginError

PROG = "kubectl-vgpu"
VERSION = f"{PROG} {__version__}"
OUTPUTS = ("table", "json", "yaml")

_EPILOG = """\
By default the extender is read through the API server's service proxy with the
kubeconfig's credentials:
  {apiserver}/api/v1/namespaces/NAMESPACE/services/SCHEME:SERVICE:PORT/proxy/api/v1/...
The API server does not pass the Authorization header on to the service, so there the
extender's admin token (--token, $VGPU_ADMIN_TOKEN) travels in X-Vgpu-Admin-Token.
With an extender that does not read that header, use --server URL instead, e.g. after
  kubectl -n vgpu-system port-forward svc/vgpu-extender 8443:443
"""


def _common() -> argparse.ArgumentParser:
    """Options every command takes (after the command's name, as kubectl's do)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--version", action="version", version=VERSION)
    common.add_argument(
        "-o", "--output", choices=OUTPUTS, default="table", help="table (default), json or yaml"
    )
    direct = common.add_argument_group("talking to the extender directly")
    direct.add_argument(
        "--server", metavar="URL", help="the extender's URL, e.g. https://127.0.0.1:8443"
    )
    direct.add_argument(
        "--token",
        default=os.environ.get("VGPU_ADMIN_TOKEN") or None,
        help="the extender's admin token (default: $VGPU_ADMIN_TOKEN)",
    )
    direct.add_argument("--ca-file", metavar="PATH", help="CA that signed the server's cert")
    direct.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the TLS certificate of the server talked to",
    )
    proxy = common.add_argument_group("through the API server (the default)")
    proxy.add_argument("--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config")
    proxy.add_argument("--context", help="the kubeconfig context (default: current)")
    proxy.add_argument(
        "-n", "--namespace", default="vgpu-system", help="the extender's (default: %(default)s)"
    )
    proxy.add_argument(
        "--service", default="vgpu-extender", help="the extender's Service (default: %(default)s)"
    )
    proxy.add_argument(
        "--service-port", default="https", help="its port, name or number (default: %(default)s)"
    )
    proxy.add_argument(
        "--service-scheme",
        choices=("https", "http"),
        default="https",
        help="what the extender serves there (default: %(default)s)",
    )
    common.add_argument(
        "--request-timeout", type=float, default=30.0, metavar="SECONDS", help="default: 30"
    )
    return common


def parser() -> argparse.ArgumentParser:
    common = _common()
    root = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect the vgpu-extender: GPUs and their pods, where a pod would go, "
        "the freest nodes.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--version", action="version", version=VERSION)
    commands = root.add_subparsers(dest="command", metavar="COMMAND", required=True)
    inspect = commands.add_parser(
        "inspect",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="nodes and GPUs: memory, cores, slots, health, cordon; one node with its pods",
        description="Every node and GPU (memory and cores used/total, slots, health, "
        "cordon, pods), or one node in detail with its pods.",
    )
    inspect.add_argument("node", nargs="?", metavar="NODE", help="only this node, in detail")
    whatif = commands.add_parser(
        "whatif",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="where a pod would go, and why not elsewhere (reserves nothing)",
        description="Ask the extender where the pod would go, with which GPUs, and why "
        "each other node would not take it. Nothing is reserved.",
    )
    whatif.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="the Pod, YAML or JSON; - for stdin"
    )
    whatif.add_argument(
        "--node",
        action="append",
        dest="nodes",
        metavar="NAME",
        help="a candidate node (repeat it); default: every node",
    )
    whatif.add_argument(
        "--detail",
        type=int,
        default=10,
        metavar="N",
        help="choose GPUs for the N best nodes (0..100, default 10)",
    )
    top = commands.add_parser(
        "top",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="nodes by free GPU memory, with fragmentation",
        description="Nodes by free GPU memory (nodes that take no pod last), with "
        "their fragmentation, and the cluster's figures.",
    )
    top.add_argument(
        "--sort-by",
        choices=("free", "fragmentation"),
        default="free",
        help="most free memory first (default), or most fragmented first",
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        from vgpu_extender.kubectl_vgpu import commands

        text = commands.run(args)
    except PluginError as exc:
        _error(exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: still one line, not a traceback
        _error(f"unexpected error: {type(exc).__name__}: {exc}")
        return 1
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        # Python flushes stdout again at exit; point it at /dev/null so that is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: {message}\n")


if __name__ == "__main__":
    raise SystemExit(main())
