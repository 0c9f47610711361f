"""The placement framework: plug-in roles, the profile built from a registry, the planner.

The engine says what fits; plug-ins (``vgpu_extender.policies``) say what is best. The
framework knows plug-ins only by their roles, never by their types.
"""

from vgpu_extender.engine.framework.profile import (
    ArgumentError,
    PluginSpec,
    Profile,
    ProfileConfig,
    ProfileError,
    Registry,
    UnknownPluginError,
)
from vgpu_extender.engine.framework.roles import (
    DeviceRankPlugin,
    FilterPlugin,
    FloatVec,
    IntVec,
    NodeScorePlugin,
    ObservePlugin,
    SignPlugin,
)
from vgpu_extender.engine.framework.runtime import Planner

__all__ = [
    "ArgumentError",
    "DeviceRankPlugin",
    "FilterPlugin",
    "FloatVec",
    "IntVec",
    "NodeScorePlugin",
    "ObservePlugin",
    "Planner",
    "PluginSpec",
    "Profile",
    "ProfileConfig",
    "ProfileError",
    "Registry",
    "SignPlugin",
    "UnknownPluginError",
]
