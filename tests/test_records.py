"""The project's records stay usable: the decision and performance indexes list every record,
the changelog keeps Keep a Changelog's shape, and no link in them leads nowhere.

docs/decisions/ holds decisions only, indexed in its README.md with a status; performance
tuning lives in docs/performance/, indexed likewise. CHANGELOG.md is written for users, so it
names features, not the work periods they were built in.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "docs" / "decisions"
PERFORMANCE = ROOT / "docs" / "performance"
CHANGELOG = ROOT / "CHANGELOG.md"

RECORD = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# The first word of a status says what the record is now; the rest may explain.
STATUSES = ("Accepted", "Superseded", "Withdrawn", "Deprecated", "Moved", "Never written")
# A number with no record must say why in its status.
GAP_REASON = re.compile(r"never written|removed|withdrawn", re.IGNORECASE)
CATEGORIES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"^## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?$")
FIGURES = re.compile(r"^Figures measured at commit [0-9a-f]{7,40}\b")


def cells(row: str) -> list[str]:
    """The cells of a Markdown table row; a `|` inside a code span is text, not a border."""
    spans = CODE_SPAN.sub(lambda m: m.group(0).replace("|", "\0"), row.strip())
    return [cell.strip().replace("\0", "|") for cell in spans.strip("|").split("|")]


def index_rows(readme: Path) -> dict[str, list[str]]:
    """The rows of an index table by record number (its first cell)."""
    rows: dict[str, list[str]] = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\|\s*\d{4}\s*\|", line):
            row = cells(line)
            assert row[0] not in rows, f"{readme.name}: {row[0]} has two rows"
            rows[row[0]] = row
    assert rows, f"{readme} has no table of records"
    return rows


def records(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if RECORD.match(p.name))


def number_of(record: Path) -> str:
    return record.name[:4]


def links(text: str) -> list[str]:
    """Link targets outside code: what a reader can follow."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return LINK.findall(text)


def relative_targets(path: Path) -> list[str]:
    return [
        target
        for target in links(path.read_text(encoding="utf-8"))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_every_decision_is_in_the_index_with_a_status() -> None:
    rows = index_rows(DECISIONS / "README.md")
    for record in records(DECISIONS):
        number = number_of(record)
        assert number in rows, f"{record.name} is not in docs/decisions/README.md"
        assert f"]({record.name})" in rows[number][1], (
            f"the row of {number} should link {record.name}, got {rows[number][1]!r}"
        )
    for number, row in rows.items():
        assert len(row) == 4, f"row {number}: expected 4 cells, got {row}"
        assert row[2].startswith(STATUSES), f"row {number}: expected a status, got {row[2]!r}"


def test_every_index_row_links_an_existing_record_or_explains_its_gap() -> None:
    for number, row in index_rows(DECISIONS / "README.md").items():
        targets = links(row[1])
        if not targets:
            assert GAP_REASON.search(row[2]), (
                f"row {number} links no record, so its status should say why, got {row[2]!r}"
            )
            continue
        (target,) = targets
        assert Path(target).name.startswith(f"{number}-"), f"row {number} links {target}"
        assert (DECISIONS / target).is_file(), f"row {number} links {target}, which is missing"


def test_a_superseded_decision_names_what_superseded_it() -> None:
    for number, row in index_rows(DECISIONS / "README.md").items():
        if row[2].startswith("Superseded"):
            assert links(row[3]), f"row {number} is superseded but names no successor"


def test_every_performance_note_is_in_its_index() -> None:
    rows = index_rows(PERFORMANCE / "README.md")
    notes = records(PERFORMANCE)
    assert notes, "docs/performance/ has no notes"
    for note in notes:
        number = number_of(note)
        assert number in rows, f"{note.name} is not in docs/performance/README.md"
        assert f"]({note.name})" in rows[number][1], f"the row of {number} should link {note.name}"


def test_every_performance_note_names_the_commit_of_its_figures() -> None:
    for note in records(PERFORMANCE):
        head = note.read_text(encoding="utf-8").splitlines()[:4]
        assert any(FIGURES.match(line) for line in head), (
            f"{note.name}: expected 'Figures measured at commit <sha>' under its title"
        )


def test_no_number_is_both_a_decision_and_a_performance_note() -> None:
    decided = {number_of(p) for p in records(DECISIONS)}
    noted = {number_of(p) for p in records(PERFORMANCE)}
    assert not decided & noted


def test_the_changelog_uses_only_keep_a_changelog_headings() -> None:
    releases: list[list[str]] = []
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            expected = "'## [Unreleased]' or '## [x.y.z] - YYYY-MM-DD'"
            assert RELEASE.match(line), f"expected {expected}, got {line!r}"
            releases.append([])
        elif line.startswith("### "):
            category = line[4:].strip()
            assert category in CATEGORIES, f"expected one of {CATEGORIES}, got {line!r}"
            assert releases, f"{line!r} comes before any release heading"
            releases[-1].append(category)
    assert releases, "CHANGELOG.md has no release section"
    for categories in releases:
        assert categories == sorted(set(categories), key=CATEGORIES.index), (
            f"each category at most once, in Keep a Changelog's order; got {categories}"
        )


@pytest.mark.parametrize("path", [CHANGELOG, DECISIONS / "README.md"], ids=lambda p: p.name)
def test_the_records_name_no_work_periods(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for pattern in (r"\bsessions?\b", r"\bsteps? \d+"):
        found = re.findall(pattern, text, re.IGNORECASE)
        assert not found, f"{path.relative_to(ROOT)} names work periods: {found}"


@pytest.mark.parametrize(
    "path",
    [
        CHANGELOG,
        ROOT / "docs" / "index.md",
        DECISIONS / "README.md",
        PERFORMANCE / "README.md",
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_relative_link_of_the_records_leads_to_a_file(path: Path) -> None:
    missing = [
        target
        for target in relative_targets(path)
        if not (path.parent / target.split("#")[0]).exists()
    ]
    assert not missing, f"{path.relative_to(ROOT)} links missing files: {missing}"
