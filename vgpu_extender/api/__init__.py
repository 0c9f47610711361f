"""The HTTP edge: kube-scheduler's extender verbs on FastAPI, built by ``create_app``."""

from vgpu_extender.api.app import create_app

__all__ = ["create_app"]
