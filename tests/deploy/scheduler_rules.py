"""kube-scheduler's own checks on a KubeSchedulerConfiguration's extenders, in Python.

kube-scheduler decodes its config strictly (an unknown key stops it) and validates
the extenders (at most one binder, weight > 0 with a prioritize verb, valid and
unique managed resource names); see the extender protocol notes, section 8.
"""

from __future__ import annotations

import re
from typing import Any

API_VERSION = "kubescheduler.config.k8s.io/v1"

#: Field names of kubescheduler.config.k8s.io/v1, by the type that holds them.
KNOWN_KEYS: dict[str, frozenset[str]] = {
    "KubeSchedulerConfiguration": frozenset(
        {
            "apiVersion",
            "kind",
            "parallelism",
            "leaderElection",
            "clientConnection",
            "enableProfiling",
            "enableContentionProfiling",
            "percentageOfNodesToScore",
            "podInitialBackoffSeconds",
            "podMaxBackoffSeconds",
            "profiles",
            "extenders",
            "delayCacheUntilActive",
        }
    ),
    "LeaderElection": frozenset(
        {
            "leaderElect",
            "leaseDuration",
            "renewDeadline",
            "retryPeriod",
            "resourceLock",
            "resourceName",
            "resourceNamespace",
        }
    ),
    "ClientConnection": frozenset(
        {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
    ),
    "Profile": frozenset({"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}),
    "Extender": frozenset(
        {
            "urlPrefix",
            "filterVerb",
            "preemptVerb",
            "prioritizeVerb",
            "weight",
            "bindVerb",
            "enableHTTPS",
            "tlsConfig",
            "httpTimeout",
            "nodeCacheCapable",
            "managedResources",
            "ignorable",
        }
    ),
    "TLSConfig": frozenset(
        {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
    ),
    "ManagedResource": frozenset({"name", "ignoredByScheduler"}),
}

VERBS = ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_EXTENDED_RESOURCE = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _unknown(kind: str, obj: Any, where: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: expected a mapping, got {type(obj).__name__}"]
    return [f"{where}: unknown key {key!r}" for key in obj if key not in KNOWN_KEYS[kind]]


def check(config: dict[str, Any]) -> list[str]:
    """Every problem kube-scheduler would refuse at start, as readable lines."""
    problems = _unknown("KubeSchedulerConfiguration", config, "config")
    if config.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion must be {API_VERSION}, got {config.get('apiVersion')!r}")
    if config.get("kind") != "KubeSchedulerConfiguration":
        problems.append(f"kind must be KubeSchedulerConfiguration, got {config.get('kind')!r}")
    for key, kind in (
        ("leaderElection", "LeaderElection"),
        ("clientConnection", "ClientConnection"),
    ):
        if key in config:
            problems += _unknown(kind, config[key], key)
    names = []
    for i, profile in enumerate(config.get("profiles") or []):
        problems += _unknown("Profile", profile, f"profiles[{i}]")
        names.append(profile.get("schedulerName", "default-scheduler"))
        pct = profile.get("percentageOfNodesToScore")
        if pct is not None and not (isinstance(pct, int) and 0 <= pct <= 100):
            problems.append(f"profiles[{i}].percentageOfNodesToScore must be 0..100, got {pct!r}")
    if len(names) != len(set(names)):
        problems.append(f"duplicate schedulerName in profiles: {names}")
    problems += _check_extenders(config.get("extenders") or [])
    return problems


def _check_extenders(extenders: list[Any]) -> list[str]:
    problems: list[str] = []
    binders = 0
    seen_resources: set[str] = set()
    for i, ext in enumerate(extenders):
        where = f"extenders[{i}]"
        problems += _unknown("Extender", ext, where)
        if not isinstance(ext, dict):
            continue
        if not ext.get("urlPrefix"):
            problems.append(f"{where}.urlPrefix is required")
        if ext.get("bindVerb"):
            binders += 1
        weight = ext.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool):
            problems.append(f"{where}.weight must be an integer, got {weight!r}")
        elif ext.get("prioritizeVerb") and weight <= 0:
            problems.append(f"{where}.weight must be positive with a prioritizeVerb, got {weight}")
        timeout = ext.get("httpTimeout")
        if timeout is not None and not (isinstance(timeout, str) and _DURATION.match(timeout)):
            problems.append(f"{where}.httpTimeout must be a duration like '30s', got {timeout!r}")
        if "tlsConfig" in ext:
            problems += _unknown("TLSConfig", ext["tlsConfig"], f"{where}.tlsConfig")
        for j, resource in enumerate(ext.get("managedResources") or []):
            problems += _unknown("ManagedResource", resource, f"{where}.managedResources[{j}]")
            name = resource.get("name", "") if isinstance(resource, dict) else ""
            if not _EXTENDED_RESOURCE.match(name) or name.startswith("kubernetes.io/"):
                problems.append(f"{where}.managedResources[{j}]: {name!r} is no extended resource")
            if name in seen_resources:
                problems.append(f"{where}.managedResources[{j}]: {name!r} is managed twice")
            seen_resources.add(name)
    if binders > 1:
        problems.append(f"only one extender can implement bind, found {binders}")
    return problems
