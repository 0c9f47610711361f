"""Every operation of the live OpenAPI schema, fuzzed: no input gets a 5xx.

schemathesis reads ``/openapi.json`` from a running extender and generates requests
for each operation, both valid ones and ones that break the schema, sent with the
admin token so that the mutating endpoints are exercised past authentication.
Bounded and deterministic: a fixed number of derandomized examples per operation.

(schemathesis' own pytest plugin does not run under this pytest, so the operations
are driven through its strategies with Hypothesis directly.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.support.server import RunningExtender, standalone_settings, start_extender

TOKEN = "fuzz-token"
#: Per operation and per mode (schema-valid, schema-breaking).
EXAMPLES = 20


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    directory = tmp_path_factory.mktemp("fuzz")
    server = start_extender(standalone_settings(directory, demo=True, admin_token=TOKEN))
    yield server
    server.stop()


def _operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


def test_no_input_gets_a_server_error(running: RunningExtender) -> None:
    schema = schemathesis.openapi.from_url(f"{running.url}/openapi.json")
    operations = _operations(schema)
    labels = {op.label for op in operations}
    # The surface this test is meant to cover is all in the schema.
    assert {
        "POST /filter",
        "POST /bind",
        "POST /webhook",
        "GET /readyz",
        "GET /api/v1/nodes/{name}",
        "POST /api/v1/whatif",
        "PUT /api/v1/inventory",
        "POST /api/v1/devices/{uuid}/cordon",
        "GET /gpushare-scheduler/inspect/{node}",
    } <= labels
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
        )

        @settings(
            max_examples=2 * EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(base_url=running.url, headers=headers)
            assert response.status_code < 500, (
                f"{case.operation.label} answered {response.status_code}: {response.text[:300]}\n"
                f"reproduce: {case.as_curl_command()}"
            )

        try:
            fuzz()
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n\n".join(failures)
