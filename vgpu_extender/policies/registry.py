"""The one place plug-ins are registered: name -> (arguments type, how to build it).

A profile (``engine.framework.Profile``) builds every entry from its typed arguments and
sorts it into the roles it implements; which roles each plug-in has is checked by the type
checker below, and by the profile at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from vgpu_extender.engine.framework import PluginSpec, Profile, ProfileConfig, Registry
from vgpu_extender.policies.fragmentation import FragmentationArgs, build_fragmentation
from vgpu_extender.policies.label_priority import LabelPriority, LabelPriorityArgs
from vgpu_extender.policies.lookahead import LookaheadArgs, build_lookahead
from vgpu_extender.policies.ss_lookahead import SsLookaheadArgs, build_ss_lookahead
from vgpu_extender.policies.sum_squares import SumSquaresArgs, build_sum_squares
from vgpu_extender.policies.usage import UsageArgs, binpack, spread

BUILTIN: Registry = {
    "binpack": PluginSpec(UsageArgs, binpack),
    "spread": PluginSpec(UsageArgs, spread),
    "label-priority": PluginSpec(LabelPriorityArgs, LabelPriority.of),
    "fragmentation": PluginSpec(FragmentationArgs, build_fragmentation),
    "lookahead": PluginSpec(LookaheadArgs, build_lookahead),
    "sum-squares": PluginSpec(SumSquaresArgs, build_sum_squares),
    "ss-lookahead": PluginSpec(SsLookaheadArgs, build_ss_lookahead),
}

if TYPE_CHECKING:  # the roles each plug-in claims, proved by the type checker
    from vgpu_extender.engine.framework import (
        DeviceRankPlugin,
        FilterPlugin,
        NodeScorePlugin,
        ObservePlugin,
        SignPlugin,
    )
    from vgpu_extender.policies.fragmentation import Fragmentation
    from vgpu_extender.policies.lookahead import Lookahead
    from vgpu_extender.policies.ss_lookahead import SsLookahead
    from vgpu_extender.policies.sum_squares import SumSquares
    from vgpu_extender.policies.usage import UsagePolicy

    def _roles(
        usage: UsagePolicy,
        label: LabelPriority,
        fgd: Fragmentation,
        ahead: Lookahead,
        ss: SumSquares,
        ss_ahead: SsLookahead,
    ) -> None:
        node_score: list[NodeScorePlugin] = [usage, label, fgd, ahead, ss, ss_ahead]
        device_rank: list[DeviceRankPlugin] = [usage, label, fgd, ahead, ss, ss_ahead]
        filters: list[FilterPlugin] = [label]
        observers: list[ObservePlugin] = [fgd, ahead, ss, ss_ahead]
        signers: list[SignPlugin] = [usage, label, fgd, ahead, ss, ss_ahead]
        del node_score, device_rank, filters, observers, signers


class PluginSettings(Protocol):
    """The settings the built-in plug-ins' arguments come from."""

    @property
    def priority_label(self) -> str: ...


def plugin_args_from_settings(settings: PluginSettings) -> dict[str, object]:
    """Each built-in plug-in's arguments, from the extender's settings."""
    return {"label-priority": LabelPriorityArgs(label=settings.priority_label)}


class ProfileSettings(PluginSettings, Protocol):
    """The settings a profile is made from."""

    @property
    def node_policy(self) -> str: ...

    @property
    def device_policy(self) -> str: ...

    @property
    def fallback_policy(self) -> str: ...

    @property
    def require_label(self) -> bool: ...


def profile_config_from_settings(settings: ProfileSettings) -> ProfileConfig:
    """The defaults and filters the settings choose."""
    return ProfileConfig(
        node_score=settings.node_policy,
        device_rank=settings.device_policy,
        fallback_score=settings.fallback_policy,
        filters=("label-priority",) if settings.require_label else (),
    )


def profile_from_settings(settings: ProfileSettings, registry: Registry = BUILTIN) -> Profile:
    """The extender's profile: the built-in plug-ins, configured by the settings."""
    return Profile(
        registry, profile_config_from_settings(settings), plugin_args_from_settings(settings)
    )


def default_profile(
    config: ProfileConfig | None = None,
    args: Mapping[str, object] | None = None,
    registry: Registry = BUILTIN,
) -> Profile:
    """A profile of the built-in plug-ins (tests, benchmarks, the simulator)."""
    return Profile(registry, config, args)
