"""One run of the deployed stack, phase by phase (see ``__main__``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from botocore.config import Config

from tests.support.aws_stack import emulator as emu
from tests.support.aws_stack import stack as st
from tests.support.aws_stack.drive import TOKEN_VARIABLE, DeployedApi, executors_toml, rsa_key_pair
from tests.support.aws_stack.timing import Phases, wait_until
from tests.support.provider_fixtures import Provider, start_provider, stop_provider

STACK = "ledger-e2e"
CODE_BUCKET = "ledger-e2e-code"
SECRET = "ledger/e2e-executors"
SECRET_KEY = "tasks_token"
# The emulator's account root (the operator deploying and checking); the functions
# get sessions of their own roles.
ROOT_KEY = "test"
# Nothing is retried behind the run's back: one attempt per call, and long enough
# for a function's cold start on a busy machine.
NO_RETRIES = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=300)

# Bounds of the waits. The stream: two cold starts (worker, projector), seconds
# each on an idle machine. The schedule: the emulator looks at its rules every
# 10 s and fires rate(1 minute) a minute after the first look that finds the
# rule enabled (the phase enables it): up to 70 s, plus the worker's work.
STREAM_SECONDS = 120
SCHEDULE_SECONDS = 130
# What a function logs when the store refused or could not answer a call
# (adapters' StoreUnavailable and its reason code; AccessDenied from IAM).
REFUSED_MARKS = ("store_unavailable", "StoreUnavailable", "AccessDenied")


class Run:
    def __init__(self, phases: Phases, teardown: ExitStack, keep_build: bool = False) -> None:
        self.phases = phases
        self.say = phases.say
        self.teardown = teardown
        self.keep_build = keep_build
        self.marker = secrets.token_hex(8)
        self.scratch = Path(tempfile.mkdtemp(prefix="ledger-e2e-aws-", dir=emu.scratch_root()))
        self.emulator: emu.Emulator | None = None
        self.provider: Provider | None = None
        self.aws: dict[str, Any] = {}
        self.resources: dict[str, str] = {}
        self.table = ""
        self.attempts: dict[str, str] = {}  # how it ran -> attempt id
        self.effects: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.torn_down_cleanly = False
        self.teardown_failures = 0
        self.leftovers: dict[int, str] = {}

    def on_teardown(self, step: Any, *args: Any) -> None:
        """Run ``step`` at the end whatever happens; a failing step fails the run
        without stopping the other steps."""

        def guarded() -> None:
            begun = time.monotonic()
            try:
                step(*args)
                self.say(f"   {step.__name__}: {time.monotonic() - begun:.1f} s")
            except Exception as exc:
                self.say(
                    f"   teardown step {getattr(step, '__name__', step)} failed: "
                    f"{type(exc).__name__}: {exc}"
                )
                self.teardown_failures += 1

        self.teardown.callback(guarded)

    # -- the phases -------------------------------------------------------------------

    def everything(self) -> None:
        # Every process this run starts (the provider, the emulator, the functions'
        # workers, the CLI) carries the marker, so the end can prove none is left.
        os.environ[emu.MARKER] = self.marker
        self.on_teardown(self.prove_nothing_left)
        self.on_teardown(self.remove_scratch)
        with self.phases.phase("reference provider"):
            self.start_provider()
        with self.phases.phase("package the functions"):
            archive, build = self.package()
        with self.phases.phase("emulator"):
            self.start_emulator()
        with self.phases.phase("deploy the stack"):
            self.deploy(archive)
        assert self.emulator is not None
        api = DeployedApi.open(
            self.emulator.url,
            self.resources["LedgerHttpApi"],
            self.emulator.port,
            self.emulator.ca_file,
            self.signing_key,
        )
        self.on_teardown(api.client.close)
        with self.phases.phase("seed the directory through the deployed API"):
            self.say(f"   {api.seed_directory(build)} directory records (admin PUTs)")
        with self.phases.phase("stream: approve, deployed worker calls the provider, projector"):
            attempt = api.approve(build, "stream")
            self.attempts["stream"] = attempt
            self.say(f"   approved {attempt} through the HTTP API")
            self.await_succeeded(attempt, "the stream", STREAM_SECONDS)
        with self.phases.phase("schedule: recovery runs an attempt the stream did not deliver"):
            self.switch_to_the_schedule()
            attempt = api.approve(build, "recovery")
            self.attempts["recovery"] = attempt
            self.say(f"   approved {attempt} with the worker's stream mapping disabled")
            self.await_succeeded(attempt, "the recovery schedule", SCHEDULE_SECONDS)
        with self.phases.phase("checks: status views, effects, audit"):
            self.check(api)

    def start_provider(self) -> None:
        process, self.provider = start_provider("e2e-provider-" + secrets.token_hex(16))
        self.on_teardown(stop_provider, process)
        self.say(f"   provider pid {process.pid} at {self.provider.url}")

    def package(self) -> tuple[Path, str]:
        assert self.provider is not None
        st.check_runtime_python()
        executors = self.scratch / "executors.toml"
        executors.write_text(executors_toml(self.provider.url))
        archive = st.package(self.scratch / "functions", executors)
        build = self.build_digest(executors)
        self.say(
            f"   {archive.stat().st_size / 1e6:.1f} MB zip for {st.host_platform()}, "
            f"executor build {build[:19]}..."
        )
        return archive, build

    def build_digest(self, executors: Path) -> str:
        """``ledger executors``: the build the directory must allow."""
        env = {
            **self.cli_env(),
            "LEDGER_EXECUTORS_FILE": str(executors),
            TOKEN_VARIABLE: "Bearer unused",
        }
        listed = subprocess.run(
            [self.ledger_bin, "executors"], env=env, check=True, capture_output=True, text=True
        ).stdout
        for line in listed.splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[0] == "tasks.create" and fields[3] == "http":
                return fields[1]
        raise AssertionError(f"`ledger executors` listed no http build:\n{listed}")

    def start_emulator(self) -> None:
        self.emulator = emu.start(self.marker, self.scratch / "emulator")
        self.on_teardown(self.stop_emulator)
        self.say(f"   ministack pid {self.emulator.process.pid} at {self.emulator.url}")
        import boto3

        session = boto3.session.Session(
            aws_access_key_id=ROOT_KEY, aws_secret_access_key=ROOT_KEY, region_name="us-east-1"
        )
        for service in (
            "cloudformation",
            "s3",
            "secretsmanager",
            "lambda",
            "events",
            "dynamodb",
            "logs",
            "cloudwatch",
            "iam",
            "sts",
        ):
            self.aws[service] = session.client(
                service,
                endpoint_url=self.emulator.url,
                verify=self.emulator.ca_file,
                config=NO_RETRIES,
            )

    def deploy(self, archive: Path) -> None:
        assert self.provider is not None
        s3, cloudformation = self.aws["s3"], self.aws["cloudformation"]
        s3.create_bucket(Bucket=CODE_BUCKET)
        s3.upload_file(str(archive), CODE_BUCKET, st.CODE_KEY)
        # What an operator does once: the executors' secret, referenced by name only.
        self.aws["secretsmanager"].create_secret(
            Name=SECRET, SecretString=json.dumps({SECRET_KEY: f"Bearer {self.provider.token}"})
        )
        self.signing_key, public_pem = rsa_key_pair()
        parameters = {
            # One line, as the parameter's description allows: CloudFormation's
            # pattern check does not match across line breaks.
            "Stage": "dev",
            "AuthRs256PublicKey": public_pem.strip().replace("\n", "\\n"),
            "ExecutorsFile": "executors.toml",
            "ExecutorSecretsId": SECRET,
            "ExecutorSecret1Key": SECRET_KEY,
            "RecoverySchedule": "rate(1 minute)",
        }
        template = st.translate(f"s3://{CODE_BUCKET}/{st.CODE_KEY}", parameters)
        template, routes = st.explicit_http_routes(template)
        self.say(
            f"   translated: {len(template['Resources'])} resources; routes made "
            f"explicit for the emulator: {', '.join(routes)}"
        )
        cloudformation.create_stack(
            StackName=STACK,
            TemplateBody=json.dumps(template),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
            Capabilities=["CAPABILITY_IAM"],
        )
        self.on_teardown(self.delete_stack)
        st.wait_for_stack(cloudformation, STACK, "CREATE_COMPLETE", 120, self.say)
        self.resources = st.physical_ids(cloudformation, STACK)
        self.table = st.outputs(cloudformation, STACK)["TableName"]
        # The recovery rule waits for its phase, so that the stream phase proves the
        # stream alone (its first tick comes a minute after its creation).
        self.aws["events"].disable_rule(Name=self.resources["WorkerFunctionRecovery"])
        self.prove_iam_is_enforced()

    def prove_iam_is_enforced(self) -> None:
        """The emulator evaluates IAM (AUTH=true): a user without a policy is refused.
        The functions call with sessions of their own roles, so a role that lacked
        an action the ledger uses would fail this run."""
        assert self.emulator is not None
        code = st.refused_without_a_policy(
            self.aws["iam"], self.emulator.url, self.emulator.ca_file, self.table, NO_RETRIES
        )
        self.say(f"   IAM is enforced: a user without a policy gets {code} on GetItem")
        for line in st.probe_roles(
            self.aws["iam"],
            self.aws["sts"],
            self.emulator.url,
            self.emulator.ca_file,
            self.table,
            self.resources,
            NO_RETRIES,
        ):
            self.say(f"   {line}")

    # -- waiting for the deployed functions ---------------------------------------------

    def view_status(self, attempt_id: str) -> str | None:
        """The status view as the projector wrote it in the table (not through the API,
        whose status read would project a missing view itself). One plain read, so a
        failed read ends the wait instead of being retried."""
        from adapters.dynamodb.views import VIEW_PREFIX
        from projections.status import STATUS_VIEW

        item = (
            self.aws["dynamodb"]
            .get_item(
                TableName=self.table,
                ConsistentRead=True,
                Key={"pk": {"S": f"{VIEW_PREFIX}{STATUS_VIEW}#{attempt_id}"}, "sk": {"N": "0"}},
            )
            .get("Item")
        )
        return None if item is None else str(json.loads(item["data"]["S"]).get("status"))

    def await_succeeded(self, attempt_id: str, path: str, seconds: float) -> None:
        """Wait for the provider's effect, then for the projector's view to say succeeded.

        An attempt that ends in another terminal status fails the wait at once.
        """
        provider = self.provider
        assert provider is not None
        before = sum(provider.effects().values())

        def effect() -> bool | None:
            if sum(provider.effects().values()) > before:
                return True
            settled = self.view_status(attempt_id)
            if settled in ("failed_safe", "outcome_unknown"):
                raise AssertionError(f"{attempt_id} ended {settled} without an effect")
            return None

        def settled() -> str | None:
            found = self.view_status(attempt_id)
            return found if found in ("succeeded", "failed_safe", "outcome_unknown") else None

        wait_until(
            f"the provider's effect ({path} -> worker -> http executor)", effect, seconds, self.say
        )
        status = wait_until("the projector's status view", settled, seconds, self.say)
        if status != "succeeded":
            raise AssertionError(f"{attempt_id} ended {status}, not succeeded")

    def switch_to_the_schedule(self) -> None:
        """Disable the worker's stream mapping (as if its records were lost) and
        enable the recovery rule."""
        lam, events = self.aws["lambda"], self.aws["events"]
        mappings = lam.list_event_source_mappings(FunctionName=self.resources["WorkerFunction"])[
            "EventSourceMappings"
        ]
        if len(mappings) != 1:
            raise AssertionError(f"the worker has {len(mappings)} stream mappings, not 1")
        lam.update_event_source_mapping(UUID=mappings[0]["UUID"], Enabled=False)
        state = lam.get_event_source_mapping(UUID=mappings[0]["UUID"])["State"]
        if state != "Disabled":
            raise AssertionError(f"the worker's stream mapping is {state}, not Disabled")
        rule = self.resources["WorkerFunctionRecovery"]
        events.enable_rule(Name=rule)
        described = events.describe_rule(Name=rule)
        inputs = [t.get("Input") for t in events.list_targets_by_rule(Rule=rule)["Targets"]]
        self.say(
            f"   worker stream mapping {state}; rule {rule} {described['State']}, "
            f"{described.get('ScheduleExpression')} -> {inputs}"
        )

    # -- checks -------------------------------------------------------------------------

    def check(self, api: DeployedApi) -> None:
        assert self.provider is not None
        for how, attempt_id in self.attempts.items():
            answer = api.status(attempt_id)
            if answer.get("status") != "succeeded":
                raise AssertionError(f"{how}: the API says {answer.get('status')}")
            self.say(
                f"   {how}: {attempt_id} succeeded (view and API), receipt "
                f"{answer.get('result', {}).get('receipt')}"
            )
        self.effects = self.provider.effects()
        self.requests = self.provider.requests()
        self.say(
            f"   provider effects per idempotency key: {sorted(self.effects.values())}, "
            f"requests per key: {sorted(self.requests.values())}"
        )
        if len(self.effects) != len(self.attempts) or set(self.effects.values()) != {1}:
            raise AssertionError(f"wanted one effect per attempt, got {self.effects}")
        alarms = self.aws["cloudwatch"].describe_alarms()["MetricAlarms"]
        states = {a["AlarmName"]: a["StateValue"] for a in alarms}
        self.say(f"   alarms: {len(states)}, states {sorted(set(states.values()))}")
        if len(states) < 6 or "ALARM" in states.values():
            raise AssertionError(f"wanted the template's alarms, none in ALARM: {states}")
        refused = self.refused_store_calls()
        self.say(f"   function log lines with a refused store call: {len(refused)}")
        if refused:
            raise AssertionError("a function's store call was refused:\n" + "\n".join(refused))
        digest = self.checkpoint()
        env = self.cli_env()
        verified = subprocess.run(
            [self.ledger_bin, "audit", "verify", "--digest", str(digest)],
            env=env,
            capture_output=True,
            text=True,
        )
        self.say(f"   ledger audit verify: {(verified.stdout + verified.stderr).strip()}")
        if verified.returncode != 0:
            raise AssertionError("ledger audit verify failed")
        for attempt_id in self.attempts.values():
            chain = subprocess.run(
                [self.ledger_bin, "audit", attempt_id, "--verify"],
                env=env,
                capture_output=True,
                text=True,
            )
            if chain.returncode != 0:
                raise AssertionError(f"ledger audit {attempt_id} --verify: {chain.stderr.strip()}")
        self.say(f"   ledger audit <attempt> --verify: {len(self.attempts)} hash chains verified")

    def checkpoint(self) -> Path:
        """Invoke the checkpoint function as its schedule does; fetch the digest it put."""
        answer = self.aws["lambda"].invoke(
            FunctionName=self.resources["CheckpointFunction"],
            Payload=json.dumps(
                {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
            ).encode(),
        )
        payload = json.loads(answer["Payload"].read() or b"{}")
        if answer.get("FunctionError"):
            raise AssertionError(f"the checkpoint function failed: {payload}")
        bucket = self.resources["AuditCheckpointBucket"]
        body = self.aws["s3"].get_object(Bucket=bucket, Key=payload["key"])["Body"].read()
        path = self.scratch / "checkpoint.json"
        path.write_bytes(body)
        self.say(f"   checkpoint s3://{bucket}/{payload['key']}: {payload['stream_count']} streams")
        return path

    # -- helpers ------------------------------------------------------------------------

    @property
    def ledger_bin(self) -> str:
        return str(Path(sys.executable).parent / "ledger")

    def cli_env(self) -> dict[str, str]:
        """The ``ledger`` command against the deployed table (nothing else of ours)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LEDGER_", "AWS_")) or k == emu.MARKER
        }
        env.update(
            {
                "LEDGER_STORE": "dynamodb",
                "LEDGER_DYNAMODB_TABLE": self.table or "unused",
                "AWS_ACCESS_KEY_ID": ROOT_KEY,
                "AWS_SECRET_ACCESS_KEY": ROOT_KEY,
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        if self.emulator is not None:
            env["AWS_ENDPOINT_URL"] = self.emulator.url
            env["AWS_CA_BUNDLE"] = self.emulator.ca_file
        return env

    def refused_store_calls(self) -> list[str]:
        """Every function log line saying a store call was refused or unavailable.

        A role missing a grant shows up here (the call is refused and the
        function logs store_unavailable), even where the work itself still got
        done another way, so a least-privilege gap fails the run.
        """
        logs = self.aws["logs"]
        found = []
        for group in logs.describe_log_groups()["logGroups"]:
            name = group["logGroupName"]
            paginator = logs.get_paginator("filter_log_events")
            for page in paginator.paginate(logGroupName=name):
                for event in page["events"]:
                    message = event["message"]
                    if any(mark in message for mark in REFUSED_MARKS):
                        found.append(f"  {name}: {message[:300].strip()}")
        return found

    def diagnose(self) -> None:
        """After a failure: the functions' log lines and the emulator's log tail."""
        logs = self.aws.get("logs")
        if logs is not None:
            try:
                for group in logs.describe_log_groups()["logGroups"]:
                    events = logs.filter_log_events(logGroupName=group["logGroupName"], limit=200)[
                        "events"
                    ]
                    for event in events[-15:]:
                        print(f"  {group['logGroupName']}: {event['message'][:300].strip()}")
            except Exception as exc:  # diagnosis must not hide the failure
                print(f"  (no function logs: {type(exc).__name__})")
        if self.emulator is not None:
            print("emulator log tail:\n" + self.emulator.log_tail(2000))

    # -- teardown -----------------------------------------------------------------------

    def delete_stack(self) -> None:
        cloudformation = self.aws["cloudformation"]
        cloudformation.delete_stack(StackName=STACK)
        st.wait_for_stack(cloudformation, STACK, "DELETE_COMPLETE", 60, self.say)
        if self.table:  # DeletionPolicy: Retain; the emulator's memory goes with it
            tables = self.aws["dynamodb"].list_tables()["TableNames"]
            self.say(f"   the table was {'retained' if self.table in tables else 'deleted'}")

    def remove_scratch(self) -> None:
        if self.keep_build:
            self.say(f"   kept the package and the checkpoint in {self.scratch}")
            shutil.rmtree(self.scratch / "emulator", ignore_errors=True)
        else:
            shutil.rmtree(self.scratch)

    def stop_emulator(self) -> None:
        assert self.emulator is not None
        killed = self.emulator.stop()
        self.say(
            f"   emulator stopped, and {len(killed)} processes of its functions "
            f"killed by pid: {sorted(killed)}"
        )

    def prove_nothing_left(self) -> None:
        self.leftovers = emu.marked_processes(self.marker)
        os.environ.pop(emu.MARKER, None)
        if self.leftovers:
            self.say(f"   LEFT RUNNING: {self.leftovers}")
        else:
            self.say("   process table scanned: no process of this run is left")
        self.torn_down_cleanly = not self.leftovers and not self.teardown_failures

    def summary(self) -> str:
        return (
            f"attempts: {self.attempts}\n"
            f"provider effects per key: {self.effects}\n"
            f"provider requests per key: {self.requests}"
        )
