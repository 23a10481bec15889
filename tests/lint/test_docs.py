"""docs/lint.md's rule table is the one `markdown_table` generates from `RULES`."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.lint import RULES
from toolkeeper.lint.rules import markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "lint.md"


def test_the_rule_table_in_the_docs_is_generated_from_the_rules() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert markdown_table() in text, (
        "docs/lint.md's rule table is stale; replace it with the output of "
        "python -c 'from toolkeeper.lint.rules import markdown_table; print(markdown_table())'"
    )


def test_the_table_lists_every_rule_once() -> None:
    rows = [line for line in markdown_table().splitlines() if line.startswith("| TK")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(RULES)
