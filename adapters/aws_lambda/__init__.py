"""AWS Lambda entry points: the stream worker (with recovery) and the projector.

Import the handler modules directly (``adapters.aws_lambda.worker.handler``);
this package re-exports nothing, so importing it loads no Powertools code.
"""
