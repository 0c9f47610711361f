"""How HAMi shares one Moore Threads GPU: its generic per-device Fit (slots, memory,
cores; 16 cores a GPU, so never alone through cores), with no topology rule. HAMi's
one-GPU-per-pod rule is a rule over the pod's containers, not a stage: ``pod_rule``."""

from __future__ import annotations

from vgpu_extender.vendors.hami_share import generic_share
from vgpu_extender.vendors.mthreads.config import WORD

MTHREADS_SHARE = generic_share(WORD, noun="gpu")
