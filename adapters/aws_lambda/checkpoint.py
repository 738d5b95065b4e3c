"""The scheduled audit checkpoint on AWS: a digest of every stream head, put into
the checkpoint bucket (S3 Object Lock, compliance mode; see infra/template.yaml).

The function may put new objects under ``digests/`` and nothing else: it can
neither delete a checkpoint nor shorten its retention, and the table's writers
have no access to the bucket at all. The digest is signed when
``LEDGER_AUDIT_SIGNING_KEY`` names a key file in the package; unsigned, its
integrity rests on the bucket's retention (docs/audit.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.audit.digests import digest_text, take_digest
from adapters.aws_lambda.common import BuiltOnce, get_ledger
from adapters.settings import SettingsError

PREFIX = "digests/"


def checkpoint_key(created_at: str) -> str:
    """``digests/2026/12/01/digest-20261201T035109.123456Z.json``: sorted by time."""
    day = created_at[:10].replace("-", "/")
    stamp = created_at.replace(":", "").replace("-", "")
    return f"{PREFIX}{day}/digest-{stamp}.json"


def s3_from_environment() -> Any:
    """An S3 client from the function's environment (its role and region)."""
    import boto3

    return boto3.client("s3")


environment_s3: BuiltOnce[Any] = BuiltOnce(s3_from_environment)
"""The S3 client of this execution environment, made on first use."""


def s3_client() -> Any:
    """One S3 client per execution environment, made on first use."""
    return environment_s3.get()


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Entry point of the schedule: write one checkpoint, answer where it went."""
    ledger = get_ledger()
    bucket = ledger.settings.audit_checkpoint_bucket
    if not bucket:
        raise SettingsError(
            "invalid settings: LEDGER_AUDIT_CHECKPOINT_BUCKET: required by the checkpoint function"
        )
    digest = take_digest(ledger.settings, ledger.store, ledger.clock)
    key = checkpoint_key(digest.created_at)
    # A checksum header: S3 requires one for objects under a default retention.
    s3_client().put_object(
        Bucket=bucket,
        Key=key,
        Body=digest_text(digest).encode("utf-8"),
        ContentType="application/json",
        ChecksumAlgorithm="SHA256",
    )
    return {
        "key": key,
        "stream_count": digest.stream_count,
        "root": digest.root,
        "signed": digest.signature is not None,
    }
