"""Transitional names for callers not yet moved to the profile (delete with them).

``services/runtime.py`` still builds ``PlannerConfig`` and ``PolicyOptions`` and
``services/preemption.py`` still calls ``Planner(index, registry, config)``; both map onto
the profile here. New code uses ``engine.framework.Profile`` and ``profile_from_settings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu_extender.engine.framework import Planner as _Planner
from vgpu_extender.engine.framework import Profile, ProfileConfig
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.policies.label_priority import DEFAULT_LABEL, LabelPriorityArgs
from vgpu_extender.policies.registry import default_profile


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    node_policy: str = "binpack"
    device_policy: str = "spread"
    fallback_policy: str = "label-priority"
    require_label: bool = False


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    priority_label: str = DEFAULT_LABEL


def legacy_profile(config: PlannerConfig | None, options: PolicyOptions | None) -> Profile:
    config = config or PlannerConfig()
    label = (options or PolicyOptions()).priority_label
    return default_profile(
        ProfileConfig(
            node_score=config.node_policy,
            device_rank=config.device_policy,
            fallback_score=config.fallback_policy,
            filters=("label-priority",) if config.require_label else (),
        ),
        {"label-priority": LabelPriorityArgs(label=label)},
    )


def Planner(  # noqa: N802 - the old class's name, for the old call
    index: ClusterIndex, profile: Profile, _config: object = None
) -> _Planner:
    return _Planner(index, profile)
