"""The kubelet device plugin API v1beta1: our proto and its generated Python modules.

Import them through :mod:`device_plugins.kubelet_api`; this package stays free of
imports so that ``python -m device_plugins.api.generate`` works even when the
generated modules are missing or stale.
"""
