"""Properties of the parser front (hypothesis): no text makes `analyze` or `decide` raise,
and no command holding an unknown piece is ever classed read-only or allowed by the
read-only policy."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.policy import Decision
from toolkeeper.runtime.invocation import Principal
from toolkeeper.shell import RuleTable, ShellEffect, analyze
from toolkeeper.shell.policy import ShellPolicy, decide
from toolkeeper.shell.rules import shipped_rules

POLICY = ShellPolicy()
PRINCIPAL = Principal("property")
ROOT = str(Path(__file__).resolve().parent)
SHELL_ALPHABET = string.ascii_letters + string.digits + " \t\n;&|<>()$`'\"\\{}[]*?~=#!-_./:%+,@^"
READ_ONLY = [
    "ls -la",
    "git status",
    "git log --oneline -n 3",
    "cat README.md",
    "grep -r x .",
    "wc -l file",
    "echo hi",
    "sort -u file",
    "head -n 5 file",
    "git diff HEAD~1",
]
CONNECTORS = ["; ", " && ", " || ", " | ", "\n", " & "]
WRAPPERS = ["", "timeout 5 ", "nice -n 3 ", "env LC_ALL=C ", "command ", "nohup "]


def _unknown_names() -> st.SearchStrategy[str]:
    known = set(shipped_rules().programs) | set(shipped_rules().wrappers)
    return (
        st.text(string.ascii_lowercase, min_size=3, max_size=10)
        .map(lambda name: f"zz{name}")
        .filter(lambda name: name not in known)
    )


@given(st.text(alphabet=SHELL_ALPHABET, max_size=200))
def test_shell_like_text_never_raises(text: str) -> None:
    analysis = analyze(text, cwd=ROOT, roots=[ROOT])
    decision = decide(analysis, principal=PRINCIPAL, policy=POLICY)
    assert decision.decision in Decision
    assert analysis.account([ROOT])
    if analysis.refused:
        assert decision.decision is Decision.DENY
        assert analysis.effect is ShellEffect.OPEN_WORLD


@given(st.text(max_size=120))
def test_any_unicode_text_never_raises(text: str) -> None:
    analysis = analyze(text, cwd=ROOT, roots=[ROOT])
    decide(analysis, principal=PRINCIPAL, policy=POLICY)
    for command in analysis.commands:
        if command.effect is ShellEffect.READ_ONLY:
            assert command.known and not command.open_world


@given(
    st.lists(st.sampled_from(READ_ONLY), min_size=0, max_size=4),
    _unknown_names(),
    st.sampled_from(CONNECTORS),
    st.sampled_from(WRAPPERS),
    st.integers(min_value=0, max_value=4),
    st.sampled_from(["{}", "echo $({})", "echo `{}`", "({})", "cat <({})", "{{ {}; }}"]),
)
def test_an_unknown_piece_is_never_read_only(
    reads: list[str],
    unknown: str,
    connector: str,
    wrapper: str,
    position: int,
    shape: str,
) -> None:
    pieces = list(reads)
    pieces.insert(min(position, len(pieces)), shape.format(f"{wrapper}{unknown} --flag x"))
    text = connector.join(pieces)
    analysis = analyze(text, cwd=ROOT, roots=[ROOT])
    assert analysis.effect is ShellEffect.OPEN_WORLD, text
    assert decide(analysis, principal=PRINCIPAL, policy=POLICY).decision is not Decision.ALLOW


@given(st.lists(st.sampled_from(READ_ONLY), min_size=1, max_size=5), st.sampled_from(CONNECTORS))
def test_known_reads_joined_stay_read_only(reads: list[str], connector: str) -> None:
    analysis = analyze(connector.join(reads), cwd=ROOT, roots=[ROOT])
    assert analysis.effect is ShellEffect.READ_ONLY
    assert decide(analysis, principal=PRINCIPAL, policy=POLICY).decision is Decision.ALLOW


@given(st.sampled_from(READ_ONLY), st.sampled_from(WRAPPERS))
def test_a_user_table_without_a_program_makes_it_unknown(read: str, wrapper: str) -> None:
    table = shipped_rules()
    name = read.split()[0]
    programs = {key: rule for key, rule in table.programs.items() if key != name}
    narrowed = RuleTable(
        programs, table.wrappers, table.harmless_variables, table.harmless_git_config
    )
    analysis = analyze(wrapper + read, cwd=ROOT, roots=[ROOT], rules=narrowed)
    assert analysis.effect is ShellEffect.OPEN_WORLD
