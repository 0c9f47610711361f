"""Write deploy/components/prometheus/prometheus-rule.yaml from rules.yaml.

rules.yaml is the one source of truth (promtool checks and tests it); the Prometheus
Operator wants the same groups inside a PrometheusRule. Run from anywhere:
``python deploy/prometheus/generate.py``; tests/deploy/test_prometheus_rules.py fails
while the two differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.yaml"
TARGET = HERE.parent / "components" / "prometheus" / "prometheus-rule.yaml"
HEADER = """\
# Generated from deploy/prometheus/rules.yaml by deploy/prometheus/generate.py: edit
# that file, then regenerate. The Prometheus resource must select this rule
# (ruleSelector, and ruleNamespaceSelector for vgpu-system); runbooks: docs/alerts.md.
"""


def prometheus_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "vgpu-extender",
            "namespace": "vgpu-system",
            "labels": {
                "app.kubernetes.io/name": "vgpu-extender",
                "app.kubernetes.io/component": "scheduler",
                "app.kubernetes.io/part-of": "vgpu-extender",
            },
        },
        "spec": {"groups": groups},
    }


def render() -> str:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    body = yaml.safe_dump(prometheus_rule(groups), sort_keys=False, width=1000)
    return HEADER + body


if __name__ == "__main__":
    TARGET.write_text(render())
