"""Every citation of the design points at something in docs/design.md.

Code, tests and documents cite the design's sections as ``design.md 5.3`` (in
markdown as a link, ``[design.md 5.3](docs/design.md#53-execute)``), its
acceptance scenarios as ``design.md 10, scenario 5`` and its invariants by id
(I1-I17, section 3). The product specification's old section numbers are
retired: only the table of design.md section 12 still names them."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".gz", ".zip", ".whl", ".db"}
SKIPPED_DIRS = {".git", ".venv", ".venv-ministack", "node_modules", "var", "__pycache__"}

HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? .*$", re.MULTILINE)
SCENARIO_ITEM = re.compile(r"^(\d+)\. \*\*", re.MULTILINE)
INVARIANT_DEFINED = re.compile(r"^- \*\*I(\d+)\*\*", re.MULTILINE)
NUMBER = r"\d+(?:\.\d+)?"
GAP = r"(?:\s+(?:#\s*)?)"  # a citation may wrap onto the next comment line
# "design.md 5.3", "design 5.3, 5.4", "design.md sections 5.6-5.9", across a line break too.
MORE = rf"(?:\s*(?:,|-|and){GAP}?{NUMBER}(?![\w.]))*"
CITATION = re.compile(rf"\bdesign(?:\.md)?(?:\s+sections?)?{GAP}({NUMBER}{MORE})")
SCENARIO = re.compile(r"\bdesign(?:\.md)?(?:\s+section)?\s+10,?\s+scenarios?\s+(\d+)")
# design.md's own cross-references: "(section 5.2)", "sections 5.6-5.10".
OWN_SECTION = re.compile(rf"\bsections?{GAP}({NUMBER}{MORE})")
LINK = re.compile(r"\]\(([^)\s#]*design\.md)(?:#([^)\s]*))?\)")
LINK_TEXT = re.compile(rf"\[design\.md ({NUMBER})[^\]]*\]\([^)\s#]*design\.md#([^)\s]*)\)")
RETIRED = re.compile(r"\bSPEC(?:\s*(?:section\s*|§\s*)?\d+(?:\.\d+)*)|(?i:\bspec\.md\b)")
INVARIANT = re.compile(r"\bI(\d+)\b")


@dataclass(frozen=True)
class Design:
    """What docs/design.md defines: section numbers, heading anchors, scenarios."""

    sections: frozenset[str]
    anchors: dict[str, str]  # GitHub's anchor of each numbered heading -> its number
    scenarios: frozenset[int]
    invariants: frozenset[int]
    table: tuple[int, int]  # where section 12 (the old numbers) starts and ends


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def read_design(text: str) -> Design:
    sections: set[str] = set()
    anchors: dict[str, str] = {}
    for match in HEADING.finditer(text):
        sections.add(match[1])
        anchors[github_anchor(match[0].lstrip("#"))] = match[1]
    start = text.index("\n## 10.")
    scenarios = text[start : text.index("\n## 11.")]
    table = text.index("\n## 12.")
    after = text.find("\n## ", table + 1)
    return Design(
        sections=frozenset(sections),
        anchors=anchors,
        scenarios=frozenset(int(n) for n in SCENARIO_ITEM.findall(scenarios)),
        invariants=frozenset(int(n) for n in INVARIANT_DEFINED.findall(text)),
        table=(table, len(text) if after < 0 else after),
    )


def numbers(cited: str) -> list[str]:
    return re.findall(NUMBER, cited)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def offences(name: str, text: str, design: Design, *, is_design: bool = False) -> list[str]:
    """One line per citation in ``text`` that points at nothing in the design."""
    found: list[str] = []
    table = design.table if is_design else (0, 0)
    for match in RETIRED.finditer(text):
        if not table[0] <= match.start() < table[1]:
            found.append(f"{name}:{line_of(text, match.start())}: old citation {match[0]!r}")
    patterns = [CITATION, OWN_SECTION] if is_design else [CITATION]
    for pattern in patterns:
        for match in pattern.finditer(text):
            if table[0] <= match.start() < table[1]:
                continue
            for number in numbers(match[1]):
                if number not in design.sections:
                    where = f"{name}:{line_of(text, match.start())}"
                    found.append(f"{where}: no section {number} in design.md ({match[0]!r})")
    for match in SCENARIO.finditer(text):
        if int(match[1]) not in design.scenarios:
            found.append(f"{name}:{line_of(text, match.start())}: no scenario {match[1]}")
    for match in INVARIANT.finditer(text):
        if int(match[1]) not in design.invariants:
            found.append(f"{name}:{line_of(text, match.start())}: no invariant {match[0]}")
    if name.endswith(".md"):
        found.extend(link_offences(name, text, design))
    return found


def link_offences(name: str, text: str, design: Design) -> list[str]:
    """Markdown links to the design: the right path, an anchor that exists, and link
    text whose section is the one the anchor opens."""
    found: list[str] = []
    here = (ROOT / name).parent
    for match in LINK.finditer(text):
        where = f"{name}:{line_of(text, match.start())}"
        if (here / match[1]).resolve() != DESIGN.resolve():
            found.append(f"{where}: {match[1]} is not docs/design.md")
        if match[2] is not None and match[2] not in design.anchors:
            found.append(f"{where}: no heading of design.md has the anchor #{match[2]}")
    for match in LINK_TEXT.finditer(text):
        anchored = design.anchors.get(match[2])
        if anchored is not None and anchored != match[1]:
            where = f"{name}:{line_of(text, match.start())}"
            found.append(f"{where}: link text says {match[1]}, #{match[2]} opens {anchored}")
    return found


def table_offences(text: str, design: Design) -> list[str]:
    """Each row of section 12 maps an old number to sections that exist."""
    start, end = design.table
    found: list[str] = []
    for row in text[start:end].splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("SPEC"):
            continue
        target = re.sub(r"\(?item (\d+|n)\)?|\([a-e]\)", "", cells[2])
        found.extend(
            f"section 12, row {cells[0]!r}: no section {number}"
            for number in numbers(target)
            if number not in design.sections
        )
    return found


def tracked_files() -> list[Path]:
    """The files git tracks or would track (untracked ones not ignored included)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        paths = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # a copy without git
        paths = [
            path
            for path in ROOT.rglob("*")
            if not SKIPPED_DIRS & set(path.relative_to(ROOT).parts[:-1])
        ]
    return sorted(path for path in paths if path.is_file() and path.suffix not in BINARY)


def test_every_citation_in_the_repository_points_at_the_design() -> None:
    design_text = DESIGN.read_text()
    design = read_design(design_text)
    files = tracked_files()
    found: list[str] = []
    cited = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        name = path.relative_to(ROOT).as_posix()
        found.extend(offences(name, text, design, is_design=path == DESIGN))
        cited += len(CITATION.findall(text))
    found.extend(table_offences(design_text, design))
    assert {"README.md", "docs/design.md", "domain/services/execution.py"} <= {
        path.relative_to(ROOT).as_posix() for path in files
    }
    assert cited > 40  # the citations are there to be checked
    assert found == []


def test_the_design_defines_what_is_cited() -> None:
    design = read_design(DESIGN.read_text())
    assert {"3.1", "3.2", "5.3", "5.11", "10", "11.2", "12"} <= design.sections
    assert design.invariants == frozenset(range(1, 18))
    assert design.scenarios == frozenset(range(1, 11))
    assert design.anchors["53-execute"] == "5.3"
    assert design.anchors["112-the-http-executor"] == "11.2"
    assert design.anchors["31-the-core-invariants-i1-i10"] == "3.1"
    assert design.anchors["12-old-section-numbers"] == "12"


def test_each_kind_of_bad_citation_is_found() -> None:
    design = read_design(DESIGN.read_text())
    old, cite, md = "SPEC", "design.md", "[design.md"  # spelled so that this file passes
    planted = {
        f"a.py: ({old} 5.3)": "old citation",
        f"a.py: ({old} section 13)": "old citation",
        f"a.py: see {old}.md": "old citation",
        f"a.py: ({cite} 5.31)": "no section 5.31",
        f"a.py: ({cite} 5.3, 5.40)": "no section 5.40",
        f"a.py: ({cite} 5.6-\n# 5.13)": "no section 5.13",
        f"a.py: {cite[:6]} 13": "no section 13",
        f"a.py: {cite} 10, scenario 11": "no scenario 11",
        f"a.py: keeps I{18}": f"no invariant I{18}",
        f"a.py: I{0} and I1-I17": f"no invariant I{0}",
        f"README.md: {md} 5.3](docs/design.md#53-exec)": "no heading",
        f"README.md: {md} 5.3](design.md#53-execute)": "is not docs/design.md",
        f"README.md: {md} 5.4](docs/design.md#53-execute)": "link text says 5.4",
    }
    for planted_text, expected in planted.items():
        name, text = planted_text.split(": ", 1)
        found = offences(name, text, design)
        assert len(found) == 1 and expected in found[0], (planted_text, found)
    fine = (
        "(design.md 5.3, 5.4) design.md 5.1-5.2 design.md 10, scenario 5 (b) I1-I17 "
        "SPEC_EXPIRES SPEC = {} spec=SPEC design.md 4. The"
    )
    assert offences("a.py", fine, design) == []
    assert offences("README.md", "[design.md 5.3](docs/design.md#53-execute)", design) == []
    text = DESIGN.read_text()
    assert offences("docs/design.md", text, design, is_design=True) == []
    found = offences("docs/design.md", f"{old} 5.3\n" + text, design, is_design=True)
    assert found == [f"docs/design.md:1: old citation '{old} 5.3'"]
