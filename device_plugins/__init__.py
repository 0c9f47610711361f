"""The node agent: discovers accelerators, reports them to the scheduler through a node
annotation, and serves kubelet's device plugin API so containers get their share."""
