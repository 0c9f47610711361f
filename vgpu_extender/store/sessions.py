"""The store's handles as its callers name them: the engine, a session, a session factory.

Services and the composition root hold these and pass them to store functions; they
never import SQLAlchemy themselves (the import contracts keep it inside the store).
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

#: What opens a session on the store: ``with sessions() as s`` or ``sessions.begin()``.
Sessions = sessionmaker[Session]

__all__ = ["Connection", "Engine", "Session", "Sessions"]
