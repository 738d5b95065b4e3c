"""The SAM stack deployed into the DynamoDB emulator (ministack) and driven end
to end: ``make e2e-aws`` runs ``python -m tests.aws_stack``. See docs/aws-emulator.md.
"""
