"""vgpu-extender: a kube-scheduler extender that shares accelerators by virtual slices."""

__version__ = "0.1.0"
