"""Evaluating a ``ShareModel``'s stages: every place that asks "does a share fit?" asks here.

The same stage tests run on grids (NumPy arrays, one cell per device: the fit and the
explanation) and on single devices (ints: the exact device choice, the reference, the
store's re-check), so the rule is written once, in the vendor's table.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain.share import Capacity, ShareDemand, ShareModel, Stage
from vgpu_extender.engine.columns import BoolGrid


def fitting_mask(
    model: ShareModel, free: Capacity, total: Capacity, demand: ShareDemand, within: BoolGrid
) -> BoolGrid:
    """The devices of ``within`` on which one share of ``demand`` passes every stage."""
    stages = model.stages_for(demand)
    if not stages:
        return within.copy()
    ok: BoolGrid = within & stages[0].test(free, total, demand)
    for stage in stages[1:]:
        ok &= stage.test(free, total, demand)
    return ok


def cumulative_masks(
    model: ShareModel, free: Capacity, total: Capacity, demand: ShareDemand, within: BoolGrid
) -> tuple[tuple[Stage, ...], list[BoolGrid]]:
    """The stages in force and, per stage, the devices of ``within`` passing it and
    every stage before it (so counts only fall from stage to stage)."""
    stages = model.stages_for(demand)
    masks: list[BoolGrid] = []
    current = within
    for stage in stages:
        current = current & stage.test(free, total, demand)
        masks.append(current)
    return stages, masks


def fits_when_empty(
    model: ShareModel, total: Capacity, demand: ShareDemand, within: BoolGrid
) -> BoolGrid:
    """The devices of ``within`` a share would fit with nothing allocated on them: where
    no preemption can help, none of a node's devices is here. Only the stages marked
    ``when_empty`` are evaluated."""
    ok = within
    for stage in model.stages_for(demand):
        if stage.when_empty:
            ok = ok & stage.test(total, total, demand)
    return ok


def first_failing(
    model: ShareModel,
    free: Capacity,
    total: Capacity,
    demand: ShareDemand,
    stages: Sequence[Stage] | None = None,
) -> Stage | None:
    """The first stage one share fails on one device (ints), or None when it fits.
    ``stages``, when given, is ``model.stages_for(demand)`` already (a caller judging many
    devices for one demand asks once)."""
    for stage in model.stages_for(demand) if stages is None else stages:
        if not stage.test(free, total, demand):
            return stage
    return None


def misfit_on_device(
    model: ShareModel, where: str, used: Capacity, total: Capacity, held: ShareDemand
) -> tuple[Stage, str] | None:
    """The store's re-check: the first stage ``held`` fails on a device that already has
    ``used`` committed (without it), with the vendor's words for it, or None."""
    free = Capacity(total.slots - used.slots, total.memory - used.memory, total.cores - used.cores)
    stage = first_failing(model, free, total, held)
    if stage is None:
        return None
    consumed = model.consumed(total, held)
    after = Capacity(
        used.slots + consumed.slots, used.memory + consumed.memory, used.cores + consumed.cores
    )
    return stage, stage.misfit(where, after, total, held)


def holds_together(
    model: ShareModel,
    free: Capacity,
    total: Capacity,
    demands: Sequence[ShareDemand],
    *,
    in_turn: bool = True,
) -> bool:
    """Whether one device (ints) takes a share of every one of ``demands``: a pod whose
    vendor puts its containers on one device (``one_device_per_pod``) may take a device
    for its first container only where the others fit beside it. ``in_turn``: each share
    is taken before the next is judged (app containers); otherwise each is judged
    against ``free`` alone (init containers, sized against the node before the pod)."""
    for demand in demands:
        if first_failing(model, free, total, demand) is not None:
            return False
        if in_turn:
            used = model.consumed(total, demand)
            free = Capacity(
                free.slots - used.slots, free.memory - used.memory, free.cores - used.cores
            )
    return True
