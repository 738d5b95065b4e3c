"""The README and the docs show what a reader can run anywhere: real digests (read
from GET /executors or computed), never placeholders such as "sha256:" + "ab" * 32
or printf'd runs of one character; no GNU-only `date -d` (macOS and the BSDs
have none); API calls that show the error body when they fail (`curl -sf` only
to poll for readiness); no scraping `ledger fake-executors` with awk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "infra" / "README.md",
        *ROOT.glob("clients/*/README.md"),
        *ROOT.glob("docs/*.md"),
    ]
)

_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})(?![0-9a-fA-F])")
_RUN = re.compile(r"([0-9a-f])\1{15,}")
_PRINTF_RUN = re.compile(r"printf\s+['\"][0-9a-fA-F]{1,2}%\.0s")
_STRING_TIMES = re.compile(r"""["'][0-9a-fA-F]{1,2}["']\s*\*\s*\d+""")
_GNU_DATE = re.compile(r"\bdate\b[^\n|;&]*\s(-d\b|--date\b)")
_CURL_SF = re.compile(r"\bcurl\s+-[a-zA-Z]*f[a-zA-Z]*\b")
_FAKE_AWK = re.compile(r"fake-executors\s*\|\s*awk")


def problems(text: str) -> list[str]:
    """Every placeholder digest, GNU-only date, silent API call or awk scrape in ``text``."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _DIGEST.finditer(line):
            if len(set(match.group(1).lower())) <= 2:
                found.append(f"line {number}: placeholder digest {match.group(0)[:16]}...")
        for pattern, what in (
            (_RUN, "a run of one hex character"),
            (_PRINTF_RUN, "a printf'd run of one character"),
            (_STRING_TIMES, "a digest made by repeating a string"),
            (_GNU_DATE, "GNU-only date -d"),
            (_FAKE_AWK, "ledger fake-executors scraped with awk"),
        ):
            if pattern.search(line):
                found.append(f"line {number}: {what}")
        if _CURL_SF.search(line) and not line.lstrip().startswith("wait_for()"):
            found.append(f"line {number}: curl -f hides the error body (use --fail-with-body)")
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_shows_a_placeholder_digest_or_a_gnu_only_command(document: Path) -> None:
    assert problems(document.read_text()) == []


@pytest.mark.parametrize(
    "planted",
    [
        '    "plugin_build": "sha256:\'"$(printf \'a%.0s\' {1..64})"\'",',
        'DIGEST = "sha256:" + "ab" * 32',
        '"schema_digest": "sha256:' + "cd" * 32 + '"',
        "executor_build = sha256:" + "0" * 64,
        "EXPIRES=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)",
        "BUILD=$($LEDGER fake-executors | awk '$1 == \"x\" {print $2}')",
        'curl -sf -X POST "$API/proposals" -d "$BODY"',
    ],
)
def test_each_kind_of_problem_is_found_when_planted(planted: str) -> None:
    assert problems(f"```sh\n{planted}\n```\n"), planted


def test_what_the_documents_do_instead_passes() -> None:
    fine = "\n".join(
        [
            'wait_for() { for i in $(seq 1 300); do curl -sf "$1" > /dev/null && return; done; }',
            'call() { curl -sS --fail-with-body "$@"; }',
            "EXPIRES=$($PY -c 'from datetime import UTC, datetime, timedelta')",
            'SCHEMA=$(echo "$EXECUTORS" | json items capability=tasks.create schema_digest)',
            '"executor_build": "sha256:' + "fd77c40f71adde8895bed6b304f1a57b" * 2 + '"',
        ]
    )
    assert problems(fine) == []
