"""The agent examples (examples/agents) run as a user runs them, against a real
`ledger serve`: each prints the tool's answer, the ledger's result of the one attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_servers import Actor, LedgerServer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "agents"


@pytest.mark.parametrize("example", ["openai_agents_example.py", "langgraph_example.py"])
def test_an_example_prints_the_ledgers_result_of_the_approved_call(
    ledger_server: LedgerServer, actor: Actor, tmp_path: Path, example: str
) -> None:
    who = actor.provenance
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "OPENAI_"))}
    env.update(
        {
            "LEDGER_URL": ledger_server.url,
            "LEDGER_PROPOSER_TOKEN": ledger_server.token("proposer"),
            "LEDGER_ACTOR_TOKEN": ledger_server.token("actor", subject=who.actor_id),
            "LEDGER_CHANNEL_TOKEN": actor.channel_token,
            "LEDGER_ACTOR": ",".join(
                [
                    who.actor_id,
                    who.identity_binding_id,
                    who.channel_binding_id,
                    who.conversation_key,
                ]
            ),
            "LEDGER_JOURNAL": str(tmp_path),
        }
    )
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count(f"shown to {who.actor_id}: ") == 1  # the preview, once
    told = json.loads(run.stdout.strip().splitlines()[-1])
    assert told["status"] == "succeeded" and told["settled"] is True
    assert told["receipt"]["provider_id"].startswith("fake_")
