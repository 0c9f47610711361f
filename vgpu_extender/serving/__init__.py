"""How the extender's listeners serve connections: caps per client and in all, timeouts.

``connection_limits(settings)`` once per process, then ``**limits.uvicorn_options()``
in each listener's ``uvicorn.Config``.
"""

from vgpu_extender.serving.budget import Caps, ConnectionBudget, Refusal
from vgpu_extender.serving.limits import LimitError, ServingLimits, connection_limits

__all__ = [
    "Caps",
    "ConnectionBudget",
    "LimitError",
    "Refusal",
    "ServingLimits",
    "connection_limits",
]
