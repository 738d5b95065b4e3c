"""The one change `make e2e-aws` makes to the translated template for the emulator:
the HTTP API's routes, declared in its OpenAPI body, also as explicit resources."""

from __future__ import annotations

from typing import Any

from tests.support.aws_stack.stack import explicit_http_routes


def test_each_route_of_the_body_becomes_an_integration_and_a_route_and_nothing_else_changes(
    transformed: dict[str, Any],
) -> None:
    shimmed, routes = explicit_http_routes(transformed)

    assert routes == ["$default"]
    added = {
        name: shimmed["Resources"][name]
        for name in set(shimmed["Resources"]) - set(transformed["Resources"])
    }
    assert sorted(resource["Type"] for resource in added.values()) == [
        "AWS::ApiGatewayV2::Integration",
        "AWS::ApiGatewayV2::Route",
    ]
    for name, resource in transformed["Resources"].items():
        assert shimmed["Resources"][name] == resource, name
    body = transformed["Resources"]["LedgerHttpApi"]["Properties"]["Body"]
    target = body["paths"]["$default"]["x-amazon-apigateway-any-method"][
        "x-amazon-apigateway-integration"
    ]
    integration = next(r for r in added.values() if r["Type"].endswith("Integration"))
    route = next(r for r in added.values() if r["Type"].endswith("Route"))
    assert integration["Properties"]["IntegrationUri"] == target["uri"]
    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
    assert route["Properties"]["RouteKey"] == "$default"
    assert route["Properties"]["ApiId"] == {"Ref": "LedgerHttpApi"}
    integration_name = next(n for n, r in added.items() if r is integration)
    assert route["Properties"]["Target"] == {"Fn::Sub": f"integrations/${{{integration_name}}}"}


def test_a_route_with_a_method_and_a_path_keeps_both_in_its_route_key() -> None:
    uri = {"Fn::Sub": "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/x/invocations"}
    operation = {
        "x-amazon-apigateway-integration": {
            "type": "aws_proxy",
            "uri": uri,
            "payloadFormatVersion": "2.0",
        }
    }
    template = {
        "Resources": {
            "Api": {
                "Type": "AWS::ApiGatewayV2::Api",
                "Properties": {
                    "Body": {
                        "paths": {
                            "/hooks/{id}": {"post": operation},
                            "$default": {"x-amazon-apigateway-any-method": operation},
                        }
                    }
                },
            }
        }
    }

    shimmed, routes = explicit_http_routes(template)

    assert routes == ["$default", "POST /hooks/{id}"]
    keys = sorted(
        r["Properties"]["RouteKey"]
        for r in shimmed["Resources"].values()
        if r["Type"] == "AWS::ApiGatewayV2::Route"
    )
    assert keys == ["$default", "POST /hooks/{id}"]
    assert len(shimmed["Resources"]) == 5


def test_the_leftover_scan_finds_a_process_of_the_run_by_its_marker_and_nothing_else(
    tmp_path: Any,
) -> None:
    import os
    import subprocess
    import sys

    from tests.support.aws_stack.emulator import MARKER, marked_processes

    marker = os.urandom(8).hex()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(sleeper, env={**os.environ, MARKER: marker, "TMPDIR": str(tmp_path)})
    other = subprocess.Popen(sleeper, env={**os.environ, MARKER: "another-run"})
    try:
        assert set(marked_processes(marker)) == {ours.pid}
        assert set(marked_processes(marker, f"TMPDIR={tmp_path}")) == {ours.pid}
        assert marked_processes(marker, "TMPDIR=/elsewhere") == {}
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()
    assert marked_processes(marker) == {}
