"""The node agent's Ascend flavour: HAMi's ascend-device-plugin for one chip kind.

Discovery (``npu-smi`` text or a static chip file), the node registration
(``hami.io/node-register-<CW>``, ``hami-vnpu-core``, the handshake), kubelet's
``huawei.com/<CW>`` resource and its ``Allocate``, on the shared agent's machinery.
"""
