"""How HAMi shares one Moore Threads GPU: its generic per-device Fit (slots, the pod's
mutex policy, memory, cores; 16 cores a GPU, so never alone through cores), with no
topology rule, and its ``customFilterRule`` over the pod's containers: "only one mthreads
device can be shared in a pod" (every container on the device the earlier ones hold)."""

from __future__ import annotations

from vgpu_extender.vendors.hami_share import generic_share
from vgpu_extender.vendors.mthreads.config import WORD

MTHREADS_SHARE = generic_share(WORD, noun="gpu", one_device_per_pod=True)
