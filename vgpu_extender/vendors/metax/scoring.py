"""HAMi's MetaX whole-card topology score (``Metax-GPU``'s ``ScoreNode``): from the node
annotations ``metax-tech.com/gpu.topology.losses`` (binpack: ``2000 - loss``) and
``metax-tech.com/gpu.topology.scores`` (spread: ``2000 - score``), JSON objects keyed by
the pod's total card count (``{"1":100,"2":200}``)."""

from __future__ import annotations

import json
from collections.abc import Mapping

LOSSES_ANNOTATION = "metax-tech.com/gpu.topology.losses"
SCORES_ANNOTATION = "metax-tech.com/gpu.topology.scores"
BASE = 2000


def topology_score(annotations: Mapping[str, str], policy: str, count: int) -> float:
    """The node's term for a pod of ``count`` cards under ``policy``; 0 when the node
    has no (readable) entry for that count or the policy is neither."""
    key = {"binpack": LOSSES_ANNOTATION, "spread": SCORES_ANNOTATION}.get(policy)
    if key is None or key not in annotations:
        return 0.0
    try:
        table = json.loads(annotations[key])
    except ValueError:
        return 0.0
    value = table.get(str(count)) if isinstance(table, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(BASE - value)
