"""Device capacity a node's host CPU can no longer feed.

FGD counts a node's free devices as fragmented for a typical pod only once the node's
free host CPU falls below that pod's CPU: a threshold, crossed when the damage is done.
Long before, a node that keeps lending CPU to CPU-heavy pods is on its way to free
devices no pod can use. The typical pods that ask for devices need, on average, ``k``
milli of host CPU per milli of device share; a node with free device capacity ``G`` and
free host CPU ``C`` can feed at most ``C / k`` of it, so

    S = max(0, G - C / k)

milli are stranded in expectation. A placement is charged the change of ``S`` it makes
(credited where it lowers ``S``: a CPU-light pod on a CPU-poor node),
``weight * (S_after - S_before) / 40`` in whole score points (40 milli is one point near
zero, as for the lookahead's outlook; whole points keep the ties the paper's ranks break).

On the openb trace (docs/simulation.md) whole GPUs were left free at the end of a replay
on nodes whose CPU the last pods had taken; charging ``S`` leaves almost none. Where host
CPU is not tracked (UNLIMITED, as in the extender) ``S`` is 0 and nothing changes.
"""

from __future__ import annotations

import numpy as np

from vgpu_extender.domain import ContainerRequest
from vgpu_extender.engine.columns import UNLIMITED
from vgpu_extender.engine.framework import FloatVec
from vgpu_extender.policies.fragment_math import (
    POINT_MILLI,
    CompiledShapes,
    Devices,
    IntArr,
    device_fits,
    share,
    taken,
)


def device_milli(container: ContainerRequest) -> int:
    """The share of one device a typical container takes, in milli (0 where it names
    device memory in MiB only: its share depends on the device)."""
    return 10 * max(container.cores, container.memory_percent)


def cpu_per_milli(shapes: CompiledShapes) -> float:
    """``k``: the typical device pods' host CPU (milli) per milli of device share they
    take, weighted as the pods are (0 where no shape's share is known)."""
    per_device = np.array([device_milli(c.container) for c in shapes.classes], dtype=np.int64)
    if not len(shapes.weight):
        return 0.0
    milli = per_device[shapes.klass] * shapes.count
    known = milli > 0
    device_milli_total = float(shapes.weight[known] @ milli[known])
    if device_milli_total <= 0:
        return 0.0
    return float(shapes.weight[known] @ shapes.cpu[known]) / device_milli_total


def stranded(free_milli: FloatVec | IntArr, free_cpu: FloatVec | IntArr, k: float) -> FloatVec:
    """``S = max(0, G - C / k)`` per node (``k`` > 0)."""
    out: FloatVec = np.maximum(0.0, np.asarray(free_milli, dtype=np.float64) - free_cpu / k)
    return out


def one_device_points(
    d: Devices, container: ContainerRequest, cpu_milli: int, k: float, weight: float
) -> FloatVec:
    """Per (node, device) of ``d``: the points one share of ``container`` (and its pod's
    ``cpu_milli``) costs there, ``-round(weight * dS / 40)``; 0 where host CPU is
    untracked or the share does not fit."""
    points = np.zeros(d.mem_free.shape, dtype=np.float64)
    tracked = d.cpu < UNLIMITED
    if k <= 0 or not weight or not tracked.any():
        return points
    g = share(d.mem_free, d.cores_free, d.slots_free, d)
    fit = device_fits(container, d.mem_free, d.cores_free, d.slots_free, d, None)
    g_after = np.where(fit, share(*taken(container, d, fit), d), g)
    free = g.sum(axis=1)
    cpu = d.cpu.astype(np.float64)
    before = stranded(free, cpu, k)
    after = stranded(free[:, None] - (g - g_after), (cpu - cpu_milli)[:, None], k)
    change = np.round(weight * (after - before[:, None]) / POINT_MILLI)
    points = np.where(fit & tracked[:, None], -change, 0.0)
    return points
