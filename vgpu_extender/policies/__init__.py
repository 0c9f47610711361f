"""Placement policies as plug-ins of the framework (``engine.framework``), registered once."""

from vgpu_extender.policies.registry import (
    BUILTIN,
    default_profile,
    plugin_args_from_settings,
    profile_config_from_settings,
    profile_from_settings,
)

__all__ = [
    "BUILTIN",
    "default_profile",
    "plugin_args_from_settings",
    "profile_config_from_settings",
    "profile_from_settings",
]
