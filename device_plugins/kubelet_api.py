"""The generated kubelet API modules: ``pb`` (messages) and ``pb_grpc`` (stubs, servicers).

The generated code is untyped; importing it by name keeps type checkers out of it,
and callers treat its messages as ``Any``. The wire names live in ``api/api.proto``.
"""

from __future__ import annotations

import importlib
from typing import Any

pb: Any = importlib.import_module("device_plugins.api.api_pb2")
pb_grpc: Any = importlib.import_module("device_plugins.api.api_pb2_grpc")

API_VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

__all__ = ["API_VERSION", "HEALTHY", "UNHEALTHY", "pb", "pb_grpc"]
