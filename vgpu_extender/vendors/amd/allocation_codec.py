"""AMD's pod annotations: HAMi's device encoding under ``hami.io/amd-devices-to-allocate``
and ``hami.io/amd-devices-allocated``, and the node lock taken at bind.

HAMi writes each device's registered product type (``amd``, ``AMD Instinct MI300X``) in
the entry's type field; the grants a bind receives carry no device type, so the vendor
word ``AMD`` is written there, and any type read back is read as AMD's.
"""

from vgpu_extender.vendors.hami_vendor import MUTEX_LOCK

TO_ALLOCATE_ANNOTATION = "hami.io/amd-devices-to-allocate"
ALLOCATED_ANNOTATION = "hami.io/amd-devices-allocated"
NODE_LOCK = MUTEX_LOCK
