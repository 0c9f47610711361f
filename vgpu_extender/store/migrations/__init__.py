"""Alembic environment and revisions for the store's schema (run through ``store.migrate``)."""
