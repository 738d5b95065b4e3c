"""The SAM stack deployed into the DynamoDB emulator (ministack) and driven end
to end: ``make e2e-aws`` runs ``python -m tests.support.aws_stack``. See docs/aws-emulator.md.
"""
