"""Package the functions, translate the SAM template, deploy and delete the stack.

The package is built by ``infra/lambda/Makefile`` (what ``sam build`` runs) with
the wheels of the machine the emulator runs on: the emulator runs each Python
function as a local process with its own interpreter, not on Lambda's arm64.
The template is translated here with the SAM translator (as ``sam deploy``
does before CloudFormation sees it), so the emulator deploys plain
CloudFormation.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from tests.support.ministack import REPO_ROOT
from tests.support.sam_template import NoManagedPolicies, load_template

CODE_KEY = "ledger-functions.zip"
TERMINAL = {
    "CREATE_COMPLETE",
    "CREATE_FAILED",
    "ROLLBACK_COMPLETE",
    "ROLLBACK_FAILED",
    "DELETE_COMPLETE",
    "DELETE_FAILED",
}


class DeployFailed(RuntimeError):
    """The stack did not reach the state wanted; the message says which resource failed."""


def host_platform() -> str:
    """The wheel platform of this machine (where the emulator runs the functions)."""
    machine = platform.machine()
    return f"manylinux2014_{'aarch64' if machine in ('aarch64', 'arm64') else machine}"


def runtime_python(template: Mapping[str, Any]) -> str:
    """``3.11`` for the template's ``python3.11`` runtime."""
    runtime = str(template["Globals"]["Function"]["Runtime"])
    return runtime.removeprefix("python")


def emulator_python(ministack: str) -> str:
    """The Python version the emulator runs the functions with: its own interpreter's."""
    first = Path(ministack).read_text(errors="replace").splitlines()[0]
    interpreter = first.removeprefix("#!").split()[0] if first.startswith("#!") else sys.executable
    found = subprocess.run(
        [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip()


def check_runtime_python() -> None:
    """Fail with one line unless the emulator runs the template's Python version."""
    from tests.support.ministack import find_executable

    wanted, emulated = runtime_python(load_template()), emulator_python(find_executable())
    if wanted != emulated:
        raise AssertionError(
            f"the template's runtime is Python {wanted} but the emulator "
            f"runs functions with Python {emulated}: recreate "
            f".venv-ministack with Python {wanted}"
        )


def refused_without_a_policy(iam: Any, url: str, ca_file: str, table: str, config: Any) -> str:
    """The error code a user without any policy gets for a read of ``table``;
    AssertionError if the read is allowed (IAM is not enforced)."""
    import boto3
    from botocore.exceptions import ClientError

    iam.create_user(UserName="e2e-no-policy")
    keys = iam.create_access_key(UserName="e2e-no-policy")["AccessKey"]
    stranger = boto3.client(
        "dynamodb",
        endpoint_url=url,
        verify=ca_file,
        region_name="us-east-1",
        aws_access_key_id=keys["AccessKeyId"],
        aws_secret_access_key=keys["SecretAccessKey"],
        config=config,
    )
    try:
        stranger.get_item(TableName=table, Key={"pk": {"S": "x"}, "sk": {"N": "0"}})
    except ClientError as exc:
        code: str = exc.response["Error"]["Code"]
        if code == "AccessDeniedException":
            return code
        raise
    raise AssertionError("the emulator let a user without a policy read the table")


KEY = {"pk": {"S": "att_e2e"}, "sk": {"N": "0"}}
# Per deployed role: a read it is granted, and one it is not (IAM sees actions and
# resources here; the emulator does not evaluate dynamodb:LeadingKeys).
ROLE_PROBES: dict[str, tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]] = {
    "WorkerRole": (("get_item", {"Key": KEY}), ("scan", {})),
    "ProjectorRole": (
        (
            "query",
            {
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": "att_e2e"}},
            },
        ),
        ("get_item", {"Key": KEY}),
    ),
    "ApiRole": (("get_item", {"Key": KEY}), ("scan", {})),
    "CheckpointRole": (
        (
            "query",
            {
                "IndexName": "list",
                "KeyConditionExpression": "list_pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": "heads#0"}},
            },
        ),
        ("scan", {}),  # it may read the layout record, so get_item is no refusal here
    ),
}


def probe_roles(
    iam: Any, sts: Any, url: str, ca_file: str, table: str, roles: Mapping[str, str], config: Any
) -> list[str]:
    """Assume each deployed role (the emulator lets the account root assume a role
    trusted by a service) and check that it may make its granted read and is
    refused the other. Returns one line per role."""
    import boto3
    from botocore.exceptions import ClientError

    lines = []
    for logical, (granted, refused) in ROLE_PROBES.items():
        arn = iam.get_role(RoleName=roles[logical])["Role"]["Arn"]
        credentials = sts.assume_role(RoleArn=arn, RoleSessionName="e2e-probe")["Credentials"]
        client = boto3.client(
            "dynamodb",
            endpoint_url=url,
            verify=ca_file,
            region_name="us-east-1",
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            config=config,
        )
        getattr(client, granted[0])(TableName=table, **granted[1])
        try:
            getattr(client, refused[0])(TableName=table, **refused[1])
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "AccessDeniedException":
                raise
        else:
            raise AssertionError(f"{logical} may {refused[0]}, which its policy does not grant")
        lines.append(f"{logical}: {granted[0]} allowed, {refused[0]} refused")
    return lines


def package(build_dir: Path, executors_file: Path) -> Path:
    """``make -C infra/lambda package`` into ``build_dir``, zipped; the zip's path."""
    built = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-s",
            "-C",
            str(REPO_ROOT / "infra" / "lambda"),
            "package",
            f"ARTIFACTS_DIR={build_dir}",
            f"PLATFORM={host_platform()}",
            f"PYTHON={sys.executable}",
            f"EXECUTORS_FILE={executors_file}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if built.returncode != 0:
        raise RuntimeError(f"packaging the functions failed:\n{built.stderr[-2000:]}")
    archive = build_dir.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for path in sorted(build_dir.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out.write(path, path.relative_to(build_dir).as_posix())
    return archive


def translate(code_uri: str, parameters: Mapping[str, str]) -> dict[str, Any]:
    """The CloudFormation template ``sam deploy`` would send, code at ``code_uri``."""
    from samtranslator.translator.transform import transform

    template = load_template()
    template["Globals"]["Function"]["CodeUri"] = code_uri
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": "us-east-1"}):
        result = transform(template, dict(parameters), NoManagedPolicies())
    plain: dict[str, Any] = json.loads(json.dumps(result))
    return plain


def explicit_http_routes(template: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The emulator ignores an HTTP API's OpenAPI ``Body`` (it makes no routes), so
    each route of the body becomes an explicit Integration and Route resource
    with the same target. AWS builds exactly these from the body; nothing else
    of the template changes. Returns the template and the routes added.
    """
    out = copy.deepcopy(dict(template))
    added: list[str] = []
    resources = out["Resources"]
    for name, resource in list(resources.items()):
        if resource["Type"] != "AWS::ApiGatewayV2::Api":
            continue
        body = resource["Properties"].get("Body") or {}
        for n, (path, methods) in enumerate(sorted(body.get("paths", {}).items())):
            for method, operation in sorted(methods.items()):
                integration = operation.get("x-amazon-apigateway-integration")
                if integration is None:
                    continue
                verb = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
                route_key = "$default" if path == "$default" else f"{verb} {path}"
                logical = f"{name}EmulatorRoute{n}{verb.title()}"
                resources[logical + "Integration"] = {
                    "Type": "AWS::ApiGatewayV2::Integration",
                    "Properties": {
                        "ApiId": {"Ref": name},
                        "IntegrationType": "AWS_PROXY",
                        "IntegrationUri": integration["uri"],
                        "PayloadFormatVersion": integration.get("payloadFormatVersion", "2.0"),
                    },
                }
                resources[logical] = {
                    "Type": "AWS::ApiGatewayV2::Route",
                    "Properties": {
                        "ApiId": {"Ref": name},
                        "RouteKey": route_key,
                        "Target": {"Fn::Sub": f"integrations/${{{logical}Integration}}"},
                    },
                }
                added.append(route_key)
    return out, added


def wait_for_stack(
    cloudformation: Any, name: str, wanted: str, seconds: float, progress: Callable[[str], None]
) -> None:
    """Poll the stack until it is ``wanted``; any other final state fails with the
    first failed resource and its reason."""
    deadline = time.monotonic() + seconds
    seen = ""
    while True:
        try:
            status = cloudformation.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
        except cloudformation.exceptions.ClientError as exc:
            if wanted == "DELETE_COMPLETE" and "does not exist" in str(exc):
                progress(f"stack {name} no longer exists")
                return
            raise
        if status != seen:
            progress(f"stack {status}")
            seen = status
        if status == wanted:
            return
        if status in TERMINAL or status.endswith("_FAILED"):
            failed = failed_resources(cloudformation, name)
            raise DeployFailed(f"stack {name} ended {status}: {failed}")
        if time.monotonic() > deadline:
            raise DeployFailed(f"stack {name} still {status} after {seconds:.0f} s")
        time.sleep(0.5)


def failed_resources(cloudformation: Any, name: str) -> str:
    events = cloudformation.describe_stack_events(StackName=name)["StackEvents"]
    failed = [
        f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}"
        for e in events
        if str(e.get("ResourceStatus", "")).endswith("_FAILED")
    ]
    return "; ".join(failed[:5]) or "no resource reported a failure"


def outputs(cloudformation: Any, name: str) -> dict[str, str]:
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def physical_ids(cloudformation: Any, name: str) -> dict[str, str]:
    found = cloudformation.describe_stack_resources(StackName=name)["StackResources"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in found}
