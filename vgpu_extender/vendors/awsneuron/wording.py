"""The words AWS Neuron users read: HAMi's reason constants, ``neuron devices`` for the
rest."""

from vgpu_extender.vendors.hami_wording import hami_wording

NEURON_WORDING = hami_wording("neuron devices")
