"""Schema revisions, one change each."""
