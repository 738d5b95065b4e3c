"""What the channel suites run on: a real `ledger serve` (SQLite or the emulator)
whose signed webhooks go to the channels, and a channel service on loopback
against a fake platform (tests/support/fake_telegram.py, fake_slack.py).

The ledger is started once per store and session, with one webhook
subscription per channel kind to a fixed loopback port; each test starts its
own channel on that port (in this process, or as ``ledger channels ... serve``
when it is to be killed), with its own state file and users file, and its own
actor, so what a test counts is its own.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from adapters.settings import load_settings
from api.cli import app
from api.http.auth import mint_token
from channels import runner
from channels.settings import SlackSettings, TelegramSettings
from domain.services.approval import Provenance
from ledger_client import (
    Client,
    PresentationOut,
    ProposalOut,
    SpecDigests,
    pick_build,
    sha256_digest,
)
from tests.support.http_server import free_port, ledger_command, wait_until_up

FAKE = "fake.provider_idempotency"
EVENTS = (
    '["attempt.succeeded", "attempt.failed_safe", "attempt.outcome_unknown", '
    '"attempt.manually_resolved", "attempt.effect_after_no_effect", '
    '"proposal.declined", "proposal.expired"]'
)
DIGESTS = SpecDigests(
    plugin_build=sha256_digest("the channel tests' assistant, build 1"),
    schema_digest=sha256_digest('{"type": "object", "required": ["title"]}'),
    policy_digest=sha256_digest("tasks.write for enrolled actors, after their approval"),
)
KINDS = ("telegram", "slack")


def secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)


def whsec() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass
class LedgerUnderTest:
    """One `ledger serve` with a webhook subscription per channel kind."""

    store: str
    url: str
    auth_secret: str
    process: subprocess.Popen[bytes]
    log: Path
    ports: dict[str, int]
    hook_secrets: dict[str, str]

    def token(self, role: str, subject: str, **claims: Any) -> str:
        settings = load_settings(auth_hs256_secret=self.auth_secret)
        return mint_token(settings, subject=subject, role=role, **claims)

    def client(self, role: str = "admin", subject: str = "ops", **claims: Any) -> Client:
        return Client(self.url, token=self.token(role, subject, **claims))

    def service_token(self, kind: str) -> str:
        """The channel service's token: the channel role, for its own channel only."""
        return self.token("channel", f"{kind}-bot", channel=kind)

    def enrol(self, kind: str, groups: list[str] | None = None) -> Provenance:
        """A fresh actor on ``kind`` (in ``groups``): identity and channel bindings
        on that channel."""
        tag = secrets.token_hex(4)
        who = Provenance(
            actor_id=f"actor-{tag}",
            identity_binding_id=f"ib-{kind}-{tag}",
            channel_binding_id=f"cb-{kind}-{tag}",
            conversation_key=f"{kind}:dm:{tag}",
        )
        with self.client() as admin:
            admin.put_actor(who.actor_id, groups=groups)
            admin.put_identity_binding(
                who.identity_binding_id,
                actor_id=who.actor_id,
                channel=kind,
                external_id=f"{kind}:{tag}",
            )
            admin.put_channel_binding(
                who.channel_binding_id, conversation_key=who.conversation_key, channel=kind
            )
            admin.put_grant(who.actor_id, "tasks.write")
        return who

    def propose_and_present(
        self, who: Provenance, content: dict[str, Any], *, expires_in: float = 86400
    ) -> tuple[ProposalOut, PresentationOut]:
        proposal = self.propose(who, content, expires_in=expires_in)
        with self.client("proposer", "assistant") as assistant:
            return proposal, assistant.present(proposal, who)

    def propose(
        self, who: Provenance, content: dict[str, Any], *, expires_in: float = 86400
    ) -> ProposalOut:
        """A proposal for ``who``, naming what a proposer reads from the ledger: the
        build's content schema digest (GET /executors) and the policy set in force."""
        expires = (datetime.now(UTC) + timedelta(seconds=expires_in)).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.client("proposer", "assistant") as assistant:
            build = pick_build(assistant.executors(), FAKE)
            in_force = assistant.policies().digest
            digests = replace(
                DIGESTS,
                schema_digest=build.schema_digest,
                policy_digest=in_force or DIGESTS.policy_digest,
            )
            spec = assistant.build_spec(
                FAKE,
                content,
                permission="tasks.write",
                effect="create",
                destination="tasks",
                digests=digests,
                sources=["message:1"],
                expires_at=expires,
            )
            return assistant.propose(who, spec)

    def present_to_member(self, proposal: ProposalOut, member: Provenance) -> PresentationOut:
        """A quorum member's own presentation, through the member's own bindings."""
        with self.client("proposer", "assistant") as assistant:
            return assistant.present(proposal, member, actor_id=member.actor_id)

    def apply_policies(self, text: str) -> str:
        """Put ``text`` in force (PUT /policies, as ``ledger policies apply``); its digest."""
        with self.client() as admin:
            current = admin.policies()
            if current.text == text and current.digest is not None:
                return current.digest
            applied = admin.apply_policies(text, expected_version=current.version)
            assert applied.digest is not None
            return applied.digest

    def proposal(self, proposal_id: str) -> Any:
        with self.client() as admin:
            return admin.get_proposal(proposal_id)

    def wait_settled(self, attempt_id: str) -> str:
        with self.client() as admin:
            return admin.wait(attempt_id, timeout=60).status

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_ledger(workdir: Path, store_env: dict[str, str], store: str) -> LedgerUnderTest:
    ports = {kind: free_port() for kind in KINDS}
    hook_secrets = {kind: whsec() for kind in KINDS}
    hooks = "".join(
        "[[webhook]]\n"
        f'id = "{kind}"\n'
        f'url = "http://127.0.0.1:{ports[kind]}/ledger/events"\n'
        f'secret = "env:{kind.upper()}_HOOK_SECRET"\n'
        f"events = {EVENTS}\n"
        "timeout_seconds = 5\n\n"
        for kind in KINDS
    )
    (workdir / "executors.toml").write_text(hooks)
    auth_secret = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
    env.update(store_env)
    env.update(
        {
            "LEDGER_AUTH_HS256_SECRET": auth_secret,
            "LEDGER_EXECUTORS_FILE": str(workdir / "executors.toml"),
            "PYTHONUNBUFFERED": "1",
            **{f"{kind.upper()}_HOOK_SECRET": hook_secrets[kind] for kind in KINDS},
        }
    )
    port = free_port()
    log = workdir / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, url + "/readyz", log)
    except BaseException:
        process.kill()
        raise
    ledger = LedgerUnderTest(store, url, auth_secret, process, log, ports, hook_secrets)
    with ledger.client() as admin:
        for build in admin.executors().items:
            admin.put_executor_build(
                build.capability, build.executor_build, delivery_mode=build.delivery_mode
            )
    return ledger


# -- a channel service -----------------------------------------------------------------


class CapturedLogs(logging.Handler):
    """Every log line of the process while a channel runs (for redaction checks)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class ChannelUnderTest:
    """One channel service on the ledger's port for its kind."""

    kind: str
    ledger: LedgerUnderTest
    workdir: Path
    platform_url: str
    platform_secrets: dict[str, str]
    users: dict[str, dict[str, str]]
    intake_token: str = field(default_factory=secret)
    state_key: str = field(default_factory=lambda: secrets.token_hex(32))
    service_token: str = ""
    logs: CapturedLogs = field(default_factory=CapturedLogs)
    channel: runner.Channel | None = None
    server: runner.Server | None = None
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.service_token = self.ledger.service_token(self.kind)
        lines = []
        for section, table in self.users.items():
            lines.append(f"[{section}]")
            lines += [f'"{k}" = "{v}"' for k, v in table.items()]
        (self.workdir / "users.toml").write_text("\n".join(lines) + "\n")

    @property
    def port(self) -> int:
        return self.ledger.ports[self.kind]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state_path(self) -> Path:
        return self.workdir / f"{self.kind}-channel.db"

    def environment(self) -> dict[str, str]:
        """The settings as ``TELEGRAM_*`` / ``SLACK_*`` variables."""
        prefix = self.kind.upper() + "_"
        values = {
            "LEDGER_URL": self.ledger.url,
            "LEDGER_TOKEN": self.service_token,
            "LEDGER_WEBHOOK_SECRET": self.ledger.hook_secrets[self.kind],
            "INTAKE_TOKEN": self.intake_token,
            "STATE_KEY": self.state_key,
            "STATE_PATH": str(self.state_path),
            "USERS_FILE": str(self.workdir / "users.toml"),
            "API_BASE_URL": self.platform_url,
            **self.platform_secrets,
        }
        return {prefix + name: value for name, value in values.items()}

    def secrets(self) -> list[str]:
        """Every secret this channel was given."""
        return [
            self.intake_token,
            self.state_key,
            self.service_token,
            self.ledger.hook_secrets[self.kind],
            self.ledger.hook_secrets[self.kind].removeprefix("whsec_"),
            *self.platform_secrets.values(),
        ]

    # -- in this process ----------------------------------------------------------------

    def start(self, clock: Callable[[], float] = time.time) -> ChannelUnderTest:
        settings_class = TelegramSettings if self.kind == "telegram" else SlackSettings
        prefix = self.kind.upper() + "_"
        overrides = {k.removeprefix(prefix).lower(): v for k, v in self.environment().items()}
        settings = settings_class(**overrides)
        runner.configure_logging(logging.DEBUG)
        for name in ("ledger.channels", ""):
            logging.getLogger(name).addHandler(self.logs)
        self.channel = runner.build(self.kind, settings, clock=clock)  # type: ignore[arg-type]
        self.server = runner.Server(self.channel.app, "127.0.0.1", self.port)
        self.channel.service.start()
        assert self.server.start(), f"the {self.kind} channel did not start"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        for name in ("ledger.channels", ""):
            logging.getLogger(name).removeHandler(self.logs)
        self.stop_process()

    # -- as its own process -------------------------------------------------------------

    def start_process(self) -> ChannelUnderTest:
        """``ledger channels <kind> serve`` with the same settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
        env.update(self.environment())
        env["PYTHONUNBUFFERED"] = "1"
        log = self.workdir / f"{self.kind}-channel.log"
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*ledger_command(), "channels", self.kind, "serve", "--port", str(self.port)],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        wait_until_up(self.process, self.url + "/healthz", log)
        return self

    def kill_process(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(15)
        self.process = None

    def stop_process(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)
        self.process = None

    def process_log(self) -> str:
        path = self.workdir / f"{self.kind}-channel.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- the intake ---------------------------------------------------------------------

    def hand_over(
        self,
        proposal: ProposalOut,
        shown: PresentationOut,
        who: Provenance,
        *,
        expires_at: str | None = None,
        token: str | None = None,
    ) -> httpx.Response:
        """What the proposer does after presenting: POST /presentations to the channel."""
        body = {
            "token": shown.token if token is None else token,
            "presentation_id": shown.presentation_id,
            "proposal_id": proposal.proposal_id,
            "version": proposal.version,
            "expires_at": expires_at or shown.expires_at,
            "preview": proposal.preview,
            "provenance": {
                "actor_id": who.actor_id,
                "identity_binding_id": who.identity_binding_id,
                "channel_binding_id": who.channel_binding_id,
                "conversation_key": who.conversation_key,
            },
        }
        return httpx.post(
            f"{self.url}/presentations",
            json=body,
            headers={"Authorization": f"Bearer {self.intake_token}"},
            timeout=30,
        )


def wait_for(condition: Callable[[], Any], seconds: float = 30.0, what: str = "it") -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def running(channel: ChannelUnderTest) -> Iterator[ChannelUnderTest]:
    try:
        yield channel
    finally:
        channel.stop()


def set_webhook(channel: ChannelUnderTest) -> None:
    """As an operator does: ``ledger channels telegram set-webhook URL``."""
    done = CliRunner().invoke(
        app,
        ["channels", "telegram", "set-webhook", f"{channel.url}/telegram/updates"],
        env=channel.environment(),
    )
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"updates go to {channel.url}/telegram/updates"


def assert_nothing_secret(text: str, secrets_: list[str], where: str) -> None:
    """No secret (nor a recognisable part of one) in ``text``."""
    for value in secrets_:
        if not value:
            continue
        assert value not in text, f"a secret reached {where}"
        assert value[:24] not in text, f"part of a secret reached {where}"
