"""A profile: the plug-ins built from a registry and their typed arguments, by role.

As in kube-scheduler, a profile is made once, at start-up: every registered plug-in is
built from its arguments (a small frozen type per plug-in, validated here), sorted into the
roles it implements, and the configured defaults are checked against those roles. A bad
name, a wrong argument or a plug-in named for a role it lacks fails the start, naming the
plug-in and the argument, never the first pod.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from vgpu_extender.domain import PodRequest
from vgpu_extender.engine.choose import DeviceRanker, by_index
from vgpu_extender.engine.explain import request_key
from vgpu_extender.engine.framework.roles import (
    DeviceRankPlugin,
    FilterPlugin,
    NodeScorePlugin,
    ObservePlugin,
    SignPlugin,
)

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class PluginSpec(Generic[A]):
    """One registry entry: the plug-in's arguments type and how to build it from them."""

    args: type[A]
    build: Callable[[A], object]


#: Plug-in name -> how to build it (the registry literal is ``policies.registry.BUILTIN``).
Registry = Mapping[str, PluginSpec[Any]]


class ProfileError(ValueError):
    """A profile cannot be built: the message names the plug-in (and the argument)."""


class UnknownPluginError(ProfileError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class ArgumentError(ValueError):
    """A plug-in argument is wrong; raised by the arguments types, naming the argument."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"argument {argument!r} {problem}")
        self.argument = argument


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """Which plug-ins act when a pod names none (HAMi's defaults)."""

    #: Scores the nodes of pods that name no node policy.
    node_score: str = "binpack"
    #: Ranks the devices of pods that name no device policy ("": lowest index first).
    device_rank: str = "spread"
    #: Scores nodes when the node score cannot tell them apart, and pods that ask for no
    #: managed device. "": no fallback.
    fallback_score: str = "label-priority"
    #: Filter plug-ins run on the nodes the engine's fit found feasible, in order.
    filters: tuple[str, ...] = ()
    #: Score pods that ask for no managed device with the node score too. The trace
    #: replay needs it: there CPU-only pods compete for host CPU with GPU pods.
    score_unmanaged: bool = False


def unknown(name: str, known: Mapping[str, object]) -> UnknownPluginError:
    return UnknownPluginError(f"unknown policy {name!r} (known: {', '.join(sorted(known))})")


class Profile:
    """The built plug-ins by role, the defaults, and the request signature."""

    def __init__(
        self,
        registry: Registry,
        config: ProfileConfig | None = None,
        args: Mapping[str, object] | None = None,
    ) -> None:
        self.config = config = config or ProfileConfig()
        given = dict(args or {})
        for name in given:
            if name not in registry:
                raise unknown(name, registry)
        self.plugins: dict[str, object] = {
            name: spec.build(_arguments(name, spec, given.get(name)))
            for name, spec in registry.items()
        }
        self.node_scorers: dict[str, NodeScorePlugin] = {}
        self.device_rankers: dict[str, DeviceRankPlugin] = {}
        self.observers: dict[str, ObservePlugin] = {}
        filters: dict[str, FilterPlugin] = {}
        self._signers: dict[str, SignPlugin] = {}
        for name, plugin in self.plugins.items():
            if isinstance(plugin, NodeScorePlugin):
                self.node_scorers[name] = plugin
            if isinstance(plugin, DeviceRankPlugin):
                self.device_rankers[name] = plugin
            if isinstance(plugin, ObservePlugin):
                self.observers[name] = plugin
            if isinstance(plugin, FilterPlugin):
                filters[name] = plugin
            if isinstance(plugin, SignPlugin):
                self._signers[name] = plugin
        self.filters: tuple[FilterPlugin, ...] = tuple(
            self._role(filters, name, "filter") for name in config.filters
        )
        self._role(self.node_scorers, config.node_score, "node score")
        if config.device_rank:
            self._role(self.device_rankers, config.device_rank, "device rank")
        self.fallback: NodeScorePlugin | None = None
        if config.fallback_score:
            self.fallback = self._role(self.node_scorers, config.fallback_score, "node score")

    # ----------------------------------------------------------------- per pod
    def node_scorer(self, request: PodRequest) -> NodeScorePlugin:
        name = request.node_policy or self.config.node_score
        scorer = self.node_scorers.get(name)
        return scorer if scorer is not None else self._role(self.node_scorers, name, "node score")

    def device_rank_name(self, request: PodRequest) -> str:
        return request.device_policy or self.config.device_rank

    def ranker(self, request: PodRequest) -> DeviceRanker:
        """The pod's device order (its device policy's, or lowest index first)."""
        name = self.device_rank_name(request)
        if not name:
            return by_index
        plugin = self.device_rankers.get(name)
        if plugin is None:
            plugin = self._role(self.device_rankers, name, "device rank")
        return plugin.rank_devices

    def observe(self, request: PodRequest) -> None:
        """Tell the pod's node and device plug-ins, once each, that it was placed."""
        node = request.node_policy or self.config.node_score
        for name in dict.fromkeys((node, self.device_rank_name(request))):
            observer = self.observers.get(name)
            if observer is not None:
                observer.observe(request)

    def signature(self, request: PodRequest) -> Hashable | None:
        """What the engine's remembered verdict for ``request`` depends on (kube-scheduler's
        pod signature), or None when it cannot be remembered.

        The verdict is the share model's (its stages read the distinct container shapes,
        the selector, NUMA binding and the host requests), and, for a pod with several
        device containers, the device ranker's, whose choice confirms each node: a ranker
        that does not sign, or signs None, makes the pod's verdict not rememberable.
        """
        share = request_key(request)
        if len(request.device_containers) <= 1:
            return share
        name = self.device_rank_name(request)
        if not name:
            return (share, "")
        signer = self._signers.get(name)
        part = signer.signature(request) if signer is not None else None
        return None if part is None else (share, part)

    def _role(self, plugins: Mapping[str, R], name: str, role: str) -> R:
        """The plug-in ``name`` in one role's table, or why it is not there."""
        plugin = plugins.get(name)
        if plugin is not None:
            return plugin
        if name not in self.plugins:
            raise unknown(name, self.plugins)
        raise ProfileError(
            f"plug-in {name!r} is not a {role} plug-in ({role} plug-ins: "
            f"{', '.join(sorted(plugins)) or 'none'})"
        )


def _arguments(name: str, spec: PluginSpec[Any], given: object) -> object:
    """The plug-in's arguments: its type's defaults, the given instance, or a mapping of
    its fields (as read from configuration), validated by the type."""
    if given is not None and not isinstance(given, (spec.args, Mapping)):
        raise ProfileError(
            f"plug-in {name!r}: arguments must be {spec.args.__name__} or a mapping of its "
            f"fields, not {type(given).__name__}"
        )
    try:
        if given is None:
            return spec.args()
        if isinstance(given, Mapping):
            return spec.args(**given)
    except (TypeError, ValueError) as exc:  # a wrong value, or a field the type lacks
        raise ProfileError(f"plug-in {name!r}: {exc}") from None
    return given
