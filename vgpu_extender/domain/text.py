"""Text the extender sends to kube-scheduler.

kube-scheduler passes an extender's reasons and errors to its event recorder as the
format string (``Eventf(pod, ..., msg)``), so every ``%`` in them turns into Go's
``%!x(MISSING)`` noise in the pod's ``FailedScheduling`` Event. The extender's own
words never contain one; text that comes from elsewhere (a user's value, a device type
from a node's annotation) has each ``%`` replaced by the full-width sign, which reads
the same to a person and is no verb to Go's ``fmt``.
"""

from __future__ import annotations

#: What stands for ``%`` in text sent to kube-scheduler (U+FF05 FULLWIDTH PERCENT SIGN).
PERCENT_STAND_IN = "\uff05"


def without_format_verbs(text: str) -> str:
    """``text`` with no ``%`` left in it (the common case returns ``text`` itself)."""
    return text.replace("%", PERCENT_STAND_IN) if "%" in text else text
