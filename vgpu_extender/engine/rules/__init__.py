"""The vendor's stage table, evaluated: over the device grid, over one device, at bind."""

from vgpu_extender.engine.rules.evaluate import (
    cumulative_masks,
    first_failing,
    fits_when_empty,
    fitting_mask,
    holds_together,
    misfit_on_device,
)

__all__ = [
    "cumulative_masks",
    "first_failing",
    "fits_when_empty",
    "fitting_mask",
    "holds_together",
    "misfit_on_device",
]
