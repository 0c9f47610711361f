"""Benchmarks: each prints a table and, with ``--json PATH``, writes its results."""
