"""`ledger audit digest | verify | prove | check-proof`: exit 0 fine, 1 tampering
(naming the stream), 2 bad input (one line); the signature is checked first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from adapters.bootstrap import build_ledger
from adapters.settings import load_settings
from api.cli import app
from api.testing import open_test_ledger

runner = CliRunner()


def invoke(args: list[str], **env: str) -> Any:
    return runner.invoke(app, args, env=env, prog_name="ledger")


def one_line(result: Any, code: int, *fragments: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def write_key(path: Path) -> tuple[str, str]:
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = path.with_suffix(".pub")
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return str(path), str(public)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    db = str(tmp_path / "ledger.db")
    with open_test_ledger(store="sqlite", sqlite_path=db, env="development") as ledger:
        attempt_id = ledger.approved(ledger.add_approver(), ledger.fake_spec())
        assert ledger.process(attempt_id).value == "succeeded"
    key, public = write_key(tmp_path / "signing.pem")
    other, other_public = write_key(tmp_path / "other.pem")
    return {
        "db": db,
        "attempt": attempt_id,
        "key": key,
        "public": public,
        "other": other,
        "other_public": other_public,
        "dir": str(tmp_path),
    }


def test_digest_verify_prove_and_check_proof(world: dict[str, str]) -> None:
    env = {"LEDGER_SQLITE_PATH": world["db"]}
    d1 = f"{world['dir']}/d1.json"
    made = invoke(["audit", "digest", "--out", d1], LEDGER_AUDIT_SIGNING_KEY=world["key"], **env)
    assert made.exit_code == 0, made.stderr
    assert "signed digest of" in made.stdout
    digest = json.loads(Path(d1).read_text())
    assert digest["signature"]["alg"] == "Ed25519" and digest["stream_count"] >= 8

    ok = invoke(["audit", "verify", "--digest", d1, "--public-key", world["public"]], **env)
    assert ok.exit_code == 0, ok.stderr
    assert ok.stdout.startswith("ok: the ledger extends the digest")

    printed = invoke(["audit", "digest"], **env)
    assert json.loads(printed.stdout)["root"] == digest["root"]
    d2 = f"{world['dir']}/d2.json"
    Path(d2).write_text(printed.stdout)
    since = invoke(
        ["audit", "verify", "--since", d1, "--digest", d2, "--public-key", world["public"]], **env
    )
    # d1 is signed and d2 is not: the key given applies to both, so d2 is refused.
    one_line(since, 2, "not signed")
    invoke(["audit", "digest", "--out", d2], LEDGER_AUDIT_SIGNING_KEY=world["key"], **env)
    since = invoke(
        ["audit", "verify", "--since", d1, "--digest", d2, "--public-key", world["public"]], **env
    )
    assert since.exit_code == 0 and "extends the digest of" in since.stdout, since.stderr

    proof_file = f"{world['dir']}/proof.json"
    proved = invoke(
        [
            "audit",
            "prove",
            world["attempt"],
            "1",
            "--digest",
            d1,
            "--public-key",
            world["public"],
            "--out",
            proof_file,
        ],
        **env,
    )
    assert proved.exit_code == 0, proved.stderr
    checked = invoke(
        ["audit", "check-proof", proof_file, "--digest", d1, "--public-key", world["public"]]
    )  # no ledger settings at all
    assert checked.exit_code == 0, checked.stderr
    assert f"{world['attempt']} version 1" in checked.stdout
    proof = json.loads(Path(proof_file).read_text())
    proof["chain"][0]["data"]["generation"] = 7
    Path(proof_file).write_text(json.dumps(proof))
    forged = invoke(
        ["audit", "check-proof", proof_file, "--digest", d1, "--public-key", world["public"]]
    )
    one_line(forged, 1, "the proof does not hold")

    # `ledger audit ID` still shows one attempt
    shown = invoke(["audit", world["attempt"], "--verify"], **env)
    assert shown.exit_code == 0 and "all chains verified" in shown.stdout


def test_tampering_exits_1_naming_the_stream(world: dict[str, str]) -> None:
    from tests.support.raw_views import read_rows, replace_rows

    env = {"LEDGER_SQLITE_PATH": world["db"]}
    d1 = f"{world['dir']}/d1.json"
    invoke(["audit", "digest", "--out", d1], **env)
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=world["db"]))
    replace_rows(ledger.store, world["attempt"], read_rows(ledger.store, world["attempt"])[:-1])
    ledger.close()
    found = invoke(["audit", "verify", "--digest", d1], **env)
    one_line(found, 1, f"stream {world['attempt']} was truncated at version 4")
    proof = invoke(["audit", "prove", world["attempt"], "1", "--digest", d1], **env)
    one_line(proof, 1, world["attempt"])


def test_a_forged_signature_is_tampering(world: dict[str, str]) -> None:
    env = {"LEDGER_SQLITE_PATH": world["db"]}
    d1 = f"{world['dir']}/d1.json"
    invoke(["audit", "digest", "--out", d1], LEDGER_AUDIT_SIGNING_KEY=world["key"], **env)
    digest = json.loads(Path(d1).read_text())
    signature = bytearray(__import__("base64").b64decode(digest["signature"]["value"]))
    signature[0] ^= 1
    digest["signature"]["value"] = __import__("base64").b64encode(bytes(signature)).decode()
    Path(d1).write_text(json.dumps(digest))
    forged = invoke(["audit", "verify", "--digest", d1, "--public-key", world["public"]], **env)
    one_line(forged, 1, "signature does not verify")
    # The signature is checked before the ledger is read.
    gone = invoke(
        ["audit", "verify", "--digest", d1, "--public-key", world["public"]],
        LEDGER_SQLITE_PATH=f"{world['dir']}/elsewhere.db",
    )
    one_line(gone, 1, "signature does not verify")


@pytest.mark.parametrize(
    "case",
    [
        "not json",
        "another key",
        "another ledger",
        "unsigned key",
        "signed no key",
        "missing file",
        "not a digest",
    ],
)
def test_bad_input_exits_2_with_one_line(world: dict[str, str], case: str) -> None:
    env = {"LEDGER_SQLITE_PATH": world["db"]}
    d1 = f"{world['dir']}/d1.json"
    signing = {"LEDGER_AUDIT_SIGNING_KEY": world["key"]}
    invoke(["audit", "digest", "--out", d1], **(signing if case != "unsigned key" else {}), **env)
    args = ["audit", "verify", "--digest", d1]
    fragment = {
        "not json": "not JSON",
        "another key": "another key",
        "another ledger": "not this one",
        "unsigned key": "not signed",
        "signed no key": "pass --public-key",
        "missing file": "cannot read",
        "not a digest": "not a ledger digest",
    }[case]
    if case == "not json":
        Path(d1).write_text("{not json")
    elif case == "not a digest":
        Path(d1).write_text('{"hello": "world"}')
    elif case == "missing file":
        args[-1] = f"{world['dir']}/nowhere.json"
    if case in ("another key", "unsigned key"):
        args += ["--public-key", world["other_public"]]
    elif case in ("not json", "missing file", "not a digest"):
        args += ["--public-key", world["public"]]
    elif case == "another ledger":
        env["LEDGER_AUDIT_LEDGER_ID"] = "some-other-ledger"
        args += ["--public-key", world["public"]]
    one_line(invoke(args, **env), 2, fragment)


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "--help"],
        ["audit", "digest", "--help"],
        ["audit", "verify", "--help"],
        ["audit", "prove", "--help"],
        ["audit", "check-proof", "--help"],
        ["audit", "show", "--help"],
        ["audit", "reindex", "--help"],
    ],
    ids=" ".join,
)
def test_every_audit_command_has_help(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 0 and "Usage: ledger audit" in result.stdout


def test_reindex_adds_streams_written_before_the_index(tmp_path: Path) -> None:
    from domain.directory import DirectoryRecord
    from domain.ports import Commit
    from tests.support.stores import store_before_head_index

    db = str(tmp_path / "ledger.db")
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db))
    legacy = store_before_head_index(ledger.store.recorder)
    legacy.commit(
        Commit(
            aggregates=[
                DirectoryRecord(
                    record_id="actor:old", kind="actor", values={}, at="2026-01-01T00:00:00Z"
                )
            ]
        )
    )
    ledger.close()
    before = json.loads(invoke(["audit", "digest"], LEDGER_SQLITE_PATH=db).stdout)
    assert before["stream_count"] == 0
    done = invoke(["audit", "reindex"], LEDGER_SQLITE_PATH=db)
    assert done.exit_code == 0 and "1 head entries added" in done.stdout, done.stderr
    after = json.loads(invoke(["audit", "digest"], LEDGER_SQLITE_PATH=db).stdout)
    assert after["streams"][0][0] == "actor:old"
    again = invoke(["audit", "reindex"], LEDGER_SQLITE_PATH=db)
    assert "0 head entries added, 1 already indexed" in again.stdout
