"""Hygon's pod annotations, as HAMi's ``PatchAnnotations`` writes them: HAMi's device
encoding (type ``DCU``) under ``hami.io/dcu-devices-to-allocate``, which the DCU plugin
consumes container by container at Allocate, and ``hami.io/dcu-devices-allocated``, the
record usage is rebuilt from. The bind takes HAMi's shared node lock."""

from __future__ import annotations

from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK

TO_ALLOCATE_ANNOTATION = "hami.io/dcu-devices-to-allocate"
ALLOCATED_ANNOTATION = "hami.io/dcu-devices-allocated"
NODE_LOCK = MUTEX_LOCK
