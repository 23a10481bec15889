"""The bypass corpus (tests/shell/bypass_corpus.jsonl): every command gets the decision the
policy intends, under the shipped read-only policy and under the example policy.

The corpus holds the public bypass classes against prefix-matching shells (compound
commands, global options, wrappers and re-exec, redirections, substitution, control and
Unicode characters, subcommand floods, git option injection, interpreter escapes, network
through other tools, symlinks and files that do not exist yet), plus ordinary commands of
each class that must still be allowed. "Sandbox unavailable" is the execution side's
(docs/shell-execution.md).

Each runs in a scratch repository that is the only writable root, holding symlinks to /etc,
to a directory outside the root and to one inside it.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.runtime.invocation import Principal
from toolkeeper.shell.analysis import analyze
from toolkeeper.shell.policy import ShellPolicy, decide

CORPUS = Path(__file__).parent / "bypass_corpus.jsonl"
ENTRIES: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line
]
CLASSES = {
    "compound commands",
    "global options",
    "wrappers and re-exec",
    "redirections",
    "substitution",
    "control and unicode characters",
    "subcommand floods",
    "git option injection",
    "interpreter escapes",
    "network through other tools",
    "symlinks and not-yet-existing files",
}
POLICIES = {"read_only_policy": ShellPolicy(), "example_policy": ShellPolicy(shipped=["example"])}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("bypass")
    outside = base / "outside"
    outside.mkdir()
    root = base / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("print(1)\n")
    (root / "build").mkdir()
    os.symlink("/etc", root / "link-etc")
    os.symlink(outside, root / "link-out")
    os.symlink(root / "src", root / "inner-link")
    return root


def test_the_corpus_is_large_and_covers_every_class() -> None:
    assert len(ENTRIES) >= 150
    counts = collections.Counter(entry["class"] for entry in ENTRIES)
    assert set(counts) == CLASSES
    assert len({entry["id"] for entry in ENTRIES}) == len(ENTRIES)
    # Each class also holds commands that must be refused or asked about, not only allowed.
    for name in CLASSES:
        decisions = {e["read_only_policy"] for e in ENTRIES if e["class"] == name}
        assert decisions - {"allow"}, name


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["id"] for entry in ENTRIES])
def test_every_command_gets_the_intended_decision(entry: dict[str, Any], repo: Path) -> None:
    analysis = analyze(entry["command"], cwd=str(repo), roots=[str(repo)])
    for policy_name, policy in POLICIES.items():
        decision = decide(analysis, principal=Principal("agent"), policy=policy)
        assert decision.decision.value == entry[policy_name], (
            f"{entry['id']} ({entry['class']}: {entry['why']}) under {policy_name}: "
            f"{decision.decision.value}, not {entry[policy_name]}; "
            f"{analysis.account([str(repo)])}; {decision.reasons}"
        )
