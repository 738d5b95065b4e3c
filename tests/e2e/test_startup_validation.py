"""Settings that used to fail only later fail at start-up, in one line naming the
variable or the file and key: the audit signing key, a deeply nested executors
file, URL ports and non-ASCII hosts, webhook actor ids. And a misspelled
``LEDGER_*`` variable is reported with the setting it most likely meant."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.settings import SettingsError, load_settings
from api.cli import app
from api.http.app import create_app
from tests.support.cli import assert_one_line_failure

runner = CliRunner()
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def invoke(args: list[str], **env: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, args, env={"LEDGER_STORE": "memory", **env}, prog_name="ledger")


# -- the audit signing key ---------------------------------------------------------


@pytest.mark.parametrize("content", [None, "not a key", "-----BEGIN PRIVATE KEY-----\nxx\n"])
def test_an_unusable_audit_signing_key_stops_the_api_at_start_up(
    tmp_path: Path, content: str | None
) -> None:
    key = tmp_path / "signing.pem"
    if content is not None:
        key.write_text(content)
    settings = load_settings(store="memory", env="test", audit_signing_key=str(key))
    with pytest.raises(SettingsError) as caught:
        create_app(settings)
    message = str(caught.value)
    assert message.startswith("invalid settings: LEDGER_AUDIT_SIGNING_KEY: ")
    assert "\n" not in message


def test_ledger_serve_names_the_bad_signing_key_in_one_line(tmp_path: Path) -> None:
    key = tmp_path / "signing.pem"
    key.write_text("not a key")
    result = invoke(["serve", "--no-worker"], LEDGER_AUDIT_SIGNING_KEY=str(key))
    assert_one_line_failure(result, "LEDGER_AUDIT_SIGNING_KEY", "not an unencrypted PEM")


def test_a_key_that_is_not_ed25519_is_named(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = tmp_path / "ec.pem"
    key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    settings = load_settings(store="memory", env="test", audit_signing_key=str(key))
    with pytest.raises(SettingsError, match="LEDGER_AUDIT_SIGNING_KEY: the key is not an Ed25519"):
        create_app(settings)


# -- the executors file --------------------------------------------------------------


def check(tmp_path: Path, text: str, **env: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "executors.toml"
    path.write_text(text)
    return invoke(
        ["executors", "check"], LEDGER_EXECUTORS_FILE=str(path), LEDGER_WEBHOOK_SECRET=SECRET, **env
    )


@pytest.mark.parametrize("depth", [40, 5000])
def test_a_deeply_nested_file_is_one_line_naming_the_file(tmp_path: Path, depth: int) -> None:
    result = check(tmp_path, "x = " + "[" * depth + "]" * depth + "\n")
    assert_one_line_failure(result, "LEDGER_EXECUTORS_FILE executors.toml", "nested more than 32")
    assert "RecursionError" not in result.stderr


HTTP = '[[http]]\ncapability = "tasks.create"\ndelivery_mode = "{mode}"\nurl = "{url}"\n'
LOOKUP = 'lookup_url = "{lookup}"\n'
WEBHOOK = (
    '[[webhook]]\nid = "chat"\nurl = "{url}"\nsecret = "env:LEDGER_WEBHOOK_SECRET"\n'
    'events = ["attempt.succeeded"]\n'
)


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        (
            HTTP.format(mode="provider_idempotency", url="https://tasks.example:99999/v1"),
            "[[http]] #1 (tasks.create): url:",
            "the port must be a number from 1 to 65535",
        ),
        (
            HTTP.format(mode="provider_idempotency", url="https://t\u0430sks.example/v1"),
            "[[http]] #1 (tasks.create): url:",
            "the host must be ASCII",
        ),
        (
            HTTP.format(mode="correlation_lookup", url="https://tasks.example/v1")
            + LOOKUP.format(lookup="https://tasks.example:70000/v1/{idempotency_key}"),
            "[[http]] #1 (tasks.create): lookup_url:",
            "the port must be a number from 1 to 65535",
        ),
        (
            HTTP.format(mode="correlation_lookup", url="https://tasks.example/v1")
            + LOOKUP.format(lookup="https://t\u0430sks.example/v1/{idempotency_key}"),
            "[[http]] #1 (tasks.create): lookup_url:",
            "the host must be ASCII",
        ),
        (
            WEBHOOK.format(url="https://chat.example:99999/events"),
            "[[webhook]] #1 (chat): url:",
            "the port must be a number from 1 to 65535",
        ),
        (
            WEBHOOK.format(url="https://ch\u0430t.example/events"),
            "[[webhook]] #1 (chat): url:",
            "the host must be ASCII",
        ),
        (
            WEBHOOK.format(url="https://chat.example/events") + 'actor_id = "alice bob"\n',
            "[[webhook]] #1 (chat): actor_id:",
            "String should match pattern",
        ),
        (
            WEBHOOK.format(url="https://chat.example/events") + 'actor_id = "al\u200bice"\n',
            "[[webhook]] #1 (chat): actor_id:",
            "String should match pattern",
        ),
    ],
)
def test_a_bad_url_or_actor_id_is_one_line_naming_the_file_and_key(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    result = check(tmp_path, text)
    assert_one_line_failure(result, "LEDGER_EXECUTORS_FILE executors.toml:", where, problem)


def test_a_good_file_still_checks(tmp_path: Path) -> None:
    text = WEBHOOK.format(url="https://chat.example:8443/events") + 'actor_id = "alice"\n'
    result = check(tmp_path, text)
    assert result.exit_code == 0, result.output


# -- misspelled variables ----------------------------------------------------------------


def test_a_misspelled_variable_is_a_warning_naming_the_nearest_setting() -> None:
    result = invoke(
        ["token", "--sub", "ops", "--role", "admin"],
        LEDGER_ENVIROMENT="production",
        LEDGER_AUTH_AUDIENC="ledger",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count(".") == 2  # the token alone on stdout
    assert result.stderr.splitlines() == [
        "warning: LEDGER_AUTH_AUDIENC is not a setting and is ignored; "
        "did you mean LEDGER_AUTH_AUDIENCE?",
        "warning: LEDGER_ENVIROMENT is not a setting and is ignored; did you mean LEDGER_ENV?",
    ]


def test_the_warning_comes_before_any_command_runs() -> None:
    result = invoke(["executors"], LEDGER_EXECUTOR_FILE="executors.toml")
    assert "did you mean LEDGER_EXECUTORS_FILE?" in result.stderr


def test_other_tools_variables_and_the_files_secrets_are_left_alone(tmp_path: Path) -> None:
    from adapters.settings import unknown_variables

    own = [
        "LEDGER_TEST_DYNAMODB",
        "LEDGER_TEST_DYNAMODB_ENDPOINT",
        "LEDGER_REQUIRE_BROWSER",
        "LEDGER_MINISTACK_BIN",
        "LEDGER_BENCH_RESULTS",
        "LEDGER_CHAOS_SCALE",
        "LEDGER_FUZZ_EXAMPLES",
        "LEDGER_CONSOLE_SCREENSHOTS",
        "LEDGER_E2E_AWS_RUN",
        "LEDGER_LOAD_PROPOSALS",
        "LEDGER_TEST_EMULATOR_IMAGE",
        "LEDGER_TEST_PROVIDER_TOKEN",
        "LEDGER_EXECUTOR_SECRET_1",
        "LEDGER_WEBHOOK_SECRET",
        "LEDGER_STORE",
        "ledger_env",
    ]
    assert unknown_variables(dict.fromkeys(own, "1")) == []
    # A secret the executors file names is its own, however it is spelled.
    path = tmp_path / "executors.toml"
    path.write_text(
        WEBHOOK.format(url="https://chat.example/e").replace(
            "LEDGER_WEBHOOK_SECRET", "LEDGER_AUTH_SECRETS"
        )
    )
    result = invoke(
        ["executors", "check"], LEDGER_EXECUTORS_FILE=str(path), LEDGER_AUTH_SECRETS=SECRET
    )
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert unknown_variables({"LEDGER_AUTH_SECRETS": "x"}) == [
        ("LEDGER_AUTH_SECRETS", "LEDGER_AUTH_HS256_SECRET")
    ]
