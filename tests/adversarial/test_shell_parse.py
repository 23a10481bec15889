"""Odd input to the shell analysis: lone surrogates, huge and deeply nested texts, floods of
commands, NUL bytes. Every one is refused (or judged) as a value, quickly, never raised."""

from __future__ import annotations

import time

import pytest

from toolkeeper.policy import Decision
from toolkeeper.runtime.invocation import Principal
from toolkeeper.shell import ShellEffect, analyze
from toolkeeper.shell.policy import ShellPolicy, decide

ODD = {
    "lone surrogate": "ls \ud800",
    "NUL": "ls\x00",
    "a megabyte": "echo " + "a" * 1_000_000,
    "unbalanced parentheses": "(" * 20_000,
    "deep subshells": "(" * 5_000 + "ls" + ")" * 5_000,
    "deep substitutions": "echo " + "$(" * 3_000 + "ls" + ")" * 3_000,
    "a flood of commands": "true;" * 10_000,
    "a flood of pipes": "ls |" * 5_000 + " cat",
    "an unterminated heredoc": "cat <<EOF\n" + "x\n" * 1000,
    "an unterminated quote": "echo 'abc",
    "only a comment": "# just a comment",
    "a function shadowing ls": "ls() { rm -rf /; }; ls",
}


@pytest.mark.parametrize("text", ODD.values(), ids=ODD.keys())
def test_odd_input_is_refused_or_judged_as_a_value(text: str, tmp_path: object) -> None:
    start = time.perf_counter()
    analysis = analyze(text, cwd=str(tmp_path), roots=[str(tmp_path)])
    decision = decide(analysis, principal=Principal("attacker"), policy=ShellPolicy())
    elapsed = time.perf_counter() - start
    # Generous: a refusal must not cost a tree walk of the whole input, or a recursion.
    assert elapsed < 10, elapsed
    if analysis.refused is not None:
        assert analysis.commands == () and analysis.effect is ShellEffect.OPEN_WORLD
        assert decision.decision is Decision.DENY
        assert "refused" in decision.reasons[0]
    else:
        assert decision.decision is not Decision.DENY or analysis.effect is ShellEffect.OPEN_WORLD


def test_a_function_definition_is_refused(tmp_path: object) -> None:
    analysis = analyze("ls() { rm -rf /; }; ls", cwd=str(tmp_path), roots=[str(tmp_path)])
    assert analysis.refused and "function_definition" in analysis.refused


def test_a_comment_only_text_runs_nothing_and_is_allowed(tmp_path: object) -> None:
    analysis = analyze("# nothing", cwd=str(tmp_path), roots=[str(tmp_path)])
    assert analysis.refused is None and analysis.commands == ()
    decision = decide(analysis, principal=Principal("a"), policy=ShellPolicy())
    assert decision.decision is Decision.ALLOW


def test_threads_analyzing_at_once_get_their_own_answers(tmp_path: object) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = ["git status", "rm -rf /", "ls | grep x", "echo $(curl x)"] * 50
    root = str(tmp_path)
    alone = {text: analyze(text, cwd=root, roots=[root]).effect for text in set(texts)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda t: analyze(t, cwd=root, roots=[root]).effect, texts))
    assert together == [alone[text] for text in texts]
