"""How HAMi shares MetaX devices: its generic per-device checks in Fit's order (slots,
the pod's mutex policy, exclusivity for a share of 100 cores, memory, cores), the NVIDIA
vendor's stages. A whole card (``Metax-GPU``) asks for all of one card's memory and
cores; an online sGPU pod asks for no cores and needs none left (HAMi ignores its cores).

HAMi's whole-card backend had a ``customFilterRule`` putting every container of a pod on
one card; a card holds one share (``Count 1``), so no pod of two GPU containers could
ever fit, and HAMi removed it (``Test_Fit_MultiContainerPodSpreadsOverCards``): the
containers spread over cards here too.

HAMi's pod-level sGPU rules (app classes not mixing, a used sGPU keeping its QoS policy)
depend on the pods already on a device, which a stage does not see; they are not here.
"""

from __future__ import annotations

from dataclasses import replace

from vgpu_extender.domain import Reason
from vgpu_extender.domain.share import ShareModel
from vgpu_extender.vendors.metax.request import GPU_WORD, SGPU_WORD
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

_GENERIC = tuple(stage for stage in NVIDIA_SHARE.stages if stage.reason is not Reason.NO_COMPUTE)

METAX_GPU_SHARE: ShareModel = replace(
    NVIDIA_SHARE, name=GPU_WORD, stages=_GENERIC, honours_mutex=True
)
METAX_SGPU_SHARE: ShareModel = replace(
    NVIDIA_SHARE, name=SGPU_WORD, stages=_GENERIC, honours_mutex=True
)
