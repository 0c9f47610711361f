"""The one error the plugin shows: a line of text and the exit code to leave with."""

from __future__ import annotations

#: Something went wrong talking to the cluster or the extender.
FAILED = 1
#: The command line or an input file was wrong.
USAGE = 2


class PluginError(Exception):
    """Printed as ``kubectl-vgpu: <message>``, never as a traceback."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
