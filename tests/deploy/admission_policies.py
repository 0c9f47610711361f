"""A ValidatingAdmissionPolicy evaluated as the API server does, with cel-python.

Covers what deploy/ uses: ``matchConstraints.resourceRules`` (operations, resources
with subresources), ``matchConditions``, ``variables`` in order, and ``validations``
with ``message`` or ``messageExpression``. An expression that fails to evaluate
counts as a failure, as ``failurePolicy: Fail`` makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import celpy
from celpy import celtypes

Obj = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    matched: bool
    denials: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.denials


@cache
def _program(expression: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    return _program(expression).evaluate(activation)


def _rule_matches(rule: Obj, request: Obj) -> bool:
    resource = request["resource"]
    name = resource["resource"] + (
        f"/{request['subResource']}" if request.get("subResource") else ""
    )
    return (
        request["operation"] in rule["operations"]
        and resource["group"] in rule["apiGroups"]
        and resource["version"] in rule["apiVersions"]
        and name in rule["resources"]
    )


def admit(policy: Obj, request: Obj, obj: Obj | None, old: Obj | None = None) -> Verdict:
    """What ``policy`` says of one request (``obj``/``old``: object and oldObject)."""
    spec = policy["spec"]
    if not any(_rule_matches(r, request) for r in spec["matchConstraints"]["resourceRules"]):
        return Verdict(matched=False)
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
    }
    for condition in spec.get("matchConditions") or []:
        if not bool(evaluate(condition["expression"], activation)):
            return Verdict(matched=False)
    variables: dict[celtypes.StringType, Any] = {}
    for variable in spec.get("variables") or []:
        activation["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = evaluate(
            variable["expression"], activation
        )
    activation["variables"] = celtypes.MapType(variables)
    denials = []
    for validation in spec["validations"]:
        result = evaluate(validation["expression"], activation)
        if isinstance(result, celpy.CELEvalError) or not bool(result):
            if "messageExpression" in validation:
                denials.append(str(evaluate(validation["messageExpression"], activation)))
            else:
                denials.append(validation.get("message") or validation["expression"])
    return Verdict(matched=True, denials=denials)


def request(
    *,
    resource: str,
    operation: str = "UPDATE",
    username: str,
    extra: dict[str, list[str]] | None = None,
    name: str = "",
    namespace: str = "",
    sub_resource: str = "",
) -> Obj:
    """An AdmissionRequest as a ValidatingAdmissionPolicy sees it."""
    user: Obj = {"username": username, "groups": ["system:serviceaccounts", "system:authenticated"]}
    if extra is not None:
        user["extra"] = extra
    body: Obj = {
        "operation": operation,
        "resource": {"group": "", "version": "v1", "resource": resource},
        "name": name,
        "namespace": namespace,
        "userInfo": user,
    }
    if sub_resource:
        body["subResource"] = sub_resource
    return body
