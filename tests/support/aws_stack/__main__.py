"""``python -m tests.support.aws_stack`` (``make e2e-aws``): the SAM stack deployed into
the emulator and driven end to end; exit 0 only when every check passed and
nothing of the run is left running. See docs/aws-emulator.md.

Phases, each timed: start the reference provider; package the functions;
start the emulator; deploy the translated template with CloudFormation; seed
the directory through the deployed API; approve one proposal and wait for the
table's stream to reach the deployed worker (which calls the provider through
the http executor) and the deployed projector to write the status view;
approve a second one with the worker's stream mapping disabled and wait for
the EventBridge recovery schedule to run it; check the views, the provider's
effects (one per idempotency key) and the audit (a checkpoint from the
deployed checkpoint function, then ``ledger audit verify`` against the
deployed table). Teardown always runs: the stack is deleted, the emulator and
every process of this run are stopped by pid, and a scan of the process table
proves none is left.

Every wait is bounded and polls against a deadline; nothing is retried.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.aws_stack",
        description="Deploy the SAM stack into the emulator and drive one proposal end to end.",
    )
    parser.add_argument(
        "--keep-build",
        action="store_true",
        help="keep the function package and the checkpoint (the path is printed)",
    )
    args = parser.parse_args(argv)

    from tests.support.aws_stack.run import Run
    from tests.support.aws_stack.timing import Phases

    phases = Phases()
    passed = False
    with ExitStack() as teardown:
        run = Run(phases, teardown, keep_build=args.keep_build)
        try:
            run.everything()
            passed = True
        except Exception as exc:
            phases.say(f"FAILED: {type(exc).__name__}: {exc}")
            run.diagnose()
        phases.say("== teardown")
    passed = passed and run.torn_down_cleanly
    print(phases.report())
    print(run.summary())
    print("e2e-aws: " + ("passed" if passed else "FAILED"), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
