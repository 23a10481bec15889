"""Our own rewordings of each poisoning technique, and benign texts with the same hard words.

The corpus (`corpus/paraphrases.json`) is written by us and the checks were changed until it
passed, so it is regression data: it keeps the checks reading what a text asks — in any
vocabulary, word order, person or tense, in the description or a parameter — rather than the
strings of the public sets. It is not evidence of generalization (docs/scanner.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.gateway.scanning.findings import Severity, blocking, scan_tool

DATA: dict[str, Any] = json.loads(
    (Path(__file__).parent / "corpus" / "paraphrases.json").read_text()
)
FEDERATION: dict[str, list[str]] = DATA["federation"]


def _scan(server: str, tool: dict[str, Any]) -> list[Any]:
    return scan_tool(server, tool, known_tools={**FEDERATION, server: []})


@pytest.mark.parametrize("entry", DATA["poisoned"], ids=lambda e: e["id"])
def test_each_rewording_of_a_technique_blocks(entry: dict[str, Any]) -> None:
    blocked = blocking(_scan("ours", entry["tool"]), {})
    assert blocked, entry["tool"]
    for finding in blocked:
        # A reviewer must be able to judge it: which check, where, how bad, and why.
        assert finding.check and finding.span is not None and finding.message
        assert finding.severity is Severity.HIGH


@pytest.mark.parametrize("entry", DATA["benign"], ids=lambda e: e["id"])
def test_honest_text_with_the_same_hard_words_passes(entry: dict[str, Any]) -> None:
    blocked = blocking(_scan("ours", entry["tool"]), {})
    assert blocked == [], [f.message for f in blocked]


def test_every_technique_class_has_several_rewordings() -> None:
    counts: dict[str, int] = {}
    for entry in DATA["poisoned"]:
        counts[entry["technique"]] = counts.get(entry["technique"], 0) + 1
    thin = {technique for technique, n in counts.items() if n < 3}
    assert not thin, thin
    assert len(DATA["benign"]) >= 100
