"""Audit checkpoints on AWS: a scheduled function writes digests to an S3 bucket
whose Object Lock (compliance mode) nobody can lift (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from tests.support.sam_template import resources_of


def test_the_bucket_locks_every_checkpoint_in_compliance_mode(template: dict[str, Any]) -> None:
    bucket = template["Resources"]["AuditCheckpointBucket"]
    assert bucket["DeletionPolicy"] == "Retain" == bucket["UpdateReplacePolicy"]
    props = bucket["Properties"]
    assert props["ObjectLockEnabled"] is True
    lock = props["ObjectLockConfiguration"]
    assert lock["ObjectLockEnabled"] == "Enabled"
    assert lock["Rule"]["DefaultRetention"] == {
        "Mode": "COMPLIANCE",
        "Days": {"Ref": "CheckpointRetentionDays"},
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]


def test_the_bucket_refuses_plain_http(template: dict[str, Any]) -> None:
    (statement,) = template["Resources"]["AuditCheckpointBucketPolicy"]["Properties"][
        "PolicyDocument"
    ]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_a_schedule_invokes_the_checkpoint_function_with_the_bucket(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    function = template["Resources"]["CheckpointFunction"]["Properties"]
    assert function["Handler"] == "adapters.aws_lambda.checkpoint.handler"
    assert function["Environment"]["Variables"]["LEDGER_AUDIT_CHECKPOINT_BUCKET"] == {
        "Ref": "AuditCheckpointBucket"
    }
    (event,) = function["Events"].values()
    assert event["Type"] == "Schedule"
    assert event["Properties"]["Schedule"] == {"Ref": "CheckpointSchedule"}
    rules = resources_of(transformed, "AWS::Events::Rule")
    targets = [t["Arn"] for r in rules.values() for t in r["Properties"]["Targets"]]
    assert {"Fn::GetAtt": ["CheckpointFunction", "Arn"]} in targets
