"""Compile ``api.proto`` into the committed ``api_pb2*.py`` modules.

The generated modules are committed so that installing the package needs no
compiler; a test regenerates them into a temporary folder and compares. The proto
is compiled relative to the folder holding the ``device_plugins`` package, so the
gRPC module imports its messages as ``device_plugins.api.api_pb2`` (a bare
``-I device_plugins/api`` would give ``import api_pb2``, which breaks inside a
package). Run ``python -m device_plugins.api.generate`` after editing the proto.
"""

from __future__ import annotations

from pathlib import Path

PROTO = Path("device_plugins") / "api" / "api.proto"
GENERATED = ("api_pb2.py", "api_pb2_grpc.py")


def source_root() -> Path:
    """The folder that holds the ``device_plugins`` package."""
    return Path(__file__).resolve().parents[2]


def generate(out_root: Path) -> list[Path]:
    """Write the generated modules under ``out_root/device_plugins/api`` and list them.

    Needs ``grpcio-tools`` (a test and development dependency only).
    """
    try:
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "regenerating the gRPC modules needs grpcio-tools: pip install grpcio-tools"
        ) from exc
    root = source_root()
    target = out_root / PROTO.parent
    target.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).resolve().parent / "_proto"
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{include}",
            f"--python_out={out_root}",
            f"--grpc_python_out={out_root}",
            str(PROTO),
        ]
    )
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status} on {root / PROTO}")
    return [target / name for name in GENERATED]


def main() -> None:
    """Regenerate the committed modules in place."""
    for path in generate(source_root()):
        print(f"wrote {path}")  # noqa: T201


if __name__ == "__main__":
    main()
