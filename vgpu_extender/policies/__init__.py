"""Placement policies as named plug-ins, and the planner that applies them."""

from vgpu_extender.policies.base import Policy
from vgpu_extender.policies.planner import Planner, PlannerConfig
from vgpu_extender.policies.registry import (
    BUILTIN,
    PolicyOptions,
    PolicyRegistry,
    UnknownPolicyError,
)

__all__ = [
    "BUILTIN",
    "Planner",
    "PlannerConfig",
    "Policy",
    "PolicyOptions",
    "PolicyRegistry",
    "UnknownPolicyError",
]
