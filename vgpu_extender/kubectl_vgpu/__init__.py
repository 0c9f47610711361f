"""``kubectl vgpu``: a kubectl plugin that reads the extender's admin API.

It is a separate, light client: it imports none of the extender's server code
(no FastAPI, SQLAlchemy, NumPy, services or store), only the standard library,
``httpx`` and PyYAML, and those only once a command needs them, so ``--help`` and
``--version`` answer at once.
"""
