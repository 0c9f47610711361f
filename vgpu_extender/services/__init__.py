"""Use cases: the only layer that combines the engine, the store and Kubernetes."""
