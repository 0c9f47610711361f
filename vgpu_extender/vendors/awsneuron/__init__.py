"""AWS Neuron devices (Inferentia, Trainium) with HAMi's resource names and annotations
(``pkg/device/awsneuron``)."""

from vgpu_extender.vendors.awsneuron.config import NeuronConfig
from vgpu_extender.vendors.awsneuron.vendor import NeuronVendor, awsneuron_vendors

__all__ = ["NeuronConfig", "NeuronVendor", "awsneuron_vendors"]
