"""The alert rules: promtool accepts them and their unit tests pass, the PrometheusRule
carries exactly them, and every alert has its labels, annotations and runbook."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import COMPONENTS, DEPLOY, ROOT, load_documents

RULES = DEPLOY / "prometheus" / "rules.yaml"
UNIT_TESTS = DEPLOY / "prometheus" / "rules.test.yaml"
GENERATOR = DEPLOY / "prometheus" / "generate.py"
PROMETHEUS_RULE = COMPONENTS / "prometheus" / "prometheus-rule.yaml"
RUNBOOKS = ROOT / "docs" / "alerts.md"
#: What the extender must alert on (issue 19 section 3).
REQUIRED = {
    "VgpuExtenderDown",
    "VgpuExtenderNoLeader",
    "VgpuExtenderNoReadyReplica",
    "VgpuExtenderFilterLatencyHigh",
    "VgpuExtenderBindLatencyHigh",
    "VgpuExtenderBindFailures",
    "VgpuExtenderStoreErrors",
    "VgpuExtenderStoreUnavailable",
    "VgpuExtenderReservationsStuck",
    "VgpuExtenderNodeInventoryUnreadable",
    "VgpuExtenderNodeInventoryStale",
    "VgpuExtenderDevicesUnhealthy",
    "VgpuExtenderImportConflicts",
}
SEVERITIES = {"critical", "warning", "info"}


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prometheus_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


def test_promtools_unit_tests_of_the_rules_pass() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", str(UNIT_TESTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=UNIT_TESTS.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_fires_waits_its_for_and_stays_silent_when_healthy() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    names = {rule["alert"] for rule in _alerts()}
    fired: set[str] = set()
    pending: set[str] = set()
    for case in tests:
        checks = case["alert_rule_test"]
        if case["name"].startswith("a healthy"):
            assert {c["alertname"] for c in checks} == names
            assert all(c["exp_alerts"] == [] for c in checks)
            continue
        for check in checks:
            (fired if check["exp_alerts"] else pending).add(check["alertname"])
    assert fired == names
    assert pending == names


def test_the_issue_s_alerts_are_all_there() -> None:
    assert {rule["alert"] for rule in _alerts()} >= REQUIRED


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: rule["alert"])
def test_each_alert_has_severity_text_and_a_runbook(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in SEVERITIES
    annotations = rule["annotations"]
    assert annotations["summary"] and annotations["description"]
    anchor = rule["alert"].lower()
    assert annotations["runbook_url"] == f"docs/alerts.md#{anchor}"
    # A heading whose GitHub anchor is the alert's name, lower-cased.
    headings = re.findall(r"^#+ (\S+)\s*$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    assert rule["alert"] in headings


def test_the_prometheus_rule_is_generated_from_the_rule_file() -> None:
    (rule,) = load_documents(PROMETHEUS_RULE)
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert PROMETHEUS_RULE.read_text() == _generator().render(), (
        "run: python deploy/prometheus/generate.py"
    )


def test_each_expression_is_one_signal_against_a_threshold() -> None:
    # The scrape test evaluates each signal against a running extender.
    for rule in _alerts():
        assert signal(rule["expr"]), rule["alert"]


def signal(expr: str) -> str:
    """The part of an alert's expression that must return series on a live extender:
    ``X`` of ``X <op> number`` or of ``absent(X)``."""
    absent = re.fullmatch(r"absent\((.+)\)", expr.strip())
    if absent:
        return absent.group(1)
    compared = re.fullmatch(r"(.+?)\s*(?:==|!=|>=|<=|>|<)\s*[0-9.]+", expr.strip())
    return compared.group(1) if compared else ""


def test_signal_finds_the_left_operand() -> None:
    assert signal('up{job="a"} == 0') == 'up{job="a"}'
    assert signal("max(x) - max(y) > 0.5") == "max(x) - max(y)"
    assert signal("absent(up)") == "up"
    assert signal("rate(x[5m])") == ""
