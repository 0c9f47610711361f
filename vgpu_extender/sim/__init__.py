"""Trace replay: the openb GPU trace through the engine and policies, or through a running
extender over HTTP, compared with the FGD paper's published numbers."""
