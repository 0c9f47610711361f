"""Placement policies as plug-ins of the framework (``engine.framework``), registered once."""

# Transitional (services/runtime.py, services/preemption.py): delete with legacy.py.
from vgpu_extender.policies.legacy import Planner, PlannerConfig, PolicyOptions
from vgpu_extender.policies.registry import (
    BUILTIN,
    default_profile,
    plugin_args_from_settings,
    profile_config_from_settings,
    profile_from_settings,
)

__all__ = [
    "BUILTIN",
    "Planner",
    "PlannerConfig",
    "PolicyOptions",
    "default_profile",
    "plugin_args_from_settings",
    "profile_config_from_settings",
    "profile_from_settings",
]
