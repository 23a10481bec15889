"""ShellPolicy and decide (toolkeeper/shell/policy.py): Cedar on command semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.errors import PolicyError
from toolkeeper.policy import Decision
from toolkeeper.runtime.invocation import Principal
from toolkeeper.shell import ShellPolicy, analyze, decide

PRINCIPAL = Principal("dev", capabilities=frozenset({"shell.write"}))


def judged(command: str, root: Path, policy: ShellPolicy) -> Decision:
    analysis = analyze(command, cwd=str(root), roots=[str(root)])
    return decide(analysis, principal=PRINCIPAL, policy=policy).decision


def test_operator_policies_judge_paths_and_principals(tmp_path: Path) -> None:
    policy = ShellPolicy(
        policies="""
        @id("ops.no_secrets")
        forbid (principal, action, resource)
        when { context.reads.contains("/etc/shadow") };

        @id("ops.writers_write")
        permit (principal, action == Toolkeeper::Action::"run", resource)
        when { context.effect == "writes_within_roots" &&
               principal.capabilities.contains("shell.write") };
        """
    )
    assert judged("cat /etc/shadow", tmp_path, policy) is Decision.DENY
    assert judged("git diff --no-index /etc/shadow /dev/null", tmp_path, policy) is Decision.DENY
    assert judged("grep root < /etc/shadow", tmp_path, policy) is Decision.DENY
    assert judged("cat /etc/hostname", tmp_path, policy) is Decision.ALLOW
    # The operator's permit has no @approval, but the shipped read-only policy's does: the
    # most cautious satisfied permit wins.
    assert judged("touch notes.txt", tmp_path, policy) is Decision.REQUIRE_APPROVAL


def test_the_decision_names_each_command_and_the_policy(tmp_path: Path) -> None:
    analysis = analyze("ls && git push", cwd=str(tmp_path), roots=[str(tmp_path)])
    decision = decide(analysis, principal=PRINCIPAL, policy=ShellPolicy(shipped=["example"]))
    assert decision.decision is Decision.DENY
    assert decision.policy_ids == ("example.never_git_push",)
    assert any(reason.startswith("git push") for reason in decision.reasons)
    assert [d.decision for _, d in decision.commands] == [Decision.ALLOW, Decision.DENY]


def test_no_permit_denies(tmp_path: Path) -> None:
    nothing = ShellPolicy(shipped=[])
    assert judged("ls", tmp_path, nothing) is Decision.DENY


def test_an_evaluation_error_denies(tmp_path: Path) -> None:
    broken = ShellPolicy(
        shipped=[],
        policies="permit (principal, action, resource) when { context.no_such_key == 1 };",
    )
    assert judged("ls", tmp_path, broken) is Decision.DENY


def test_conditions_are_refused_with_the_fix() -> None:
    with pytest.raises(PolicyError, match="write the constraint in `when`"):
        ShellPolicy(policies='@conditions("x == 1")\npermit (principal, action, resource);')


def test_unknown_shipped_names_and_bad_files_are_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="choose one of"):
        ShellPolicy(shipped=["nope"])
    with pytest.raises(PolicyError, match="cannot read policy file"):
        ShellPolicy(policy_files=[tmp_path / "absent.cedar"])
    with pytest.raises(PolicyError):
        ShellPolicy(policies="permit (principal, action")


def test_the_cache_keeps_answers_only_when_asked(tmp_path: Path) -> None:
    kept = ShellPolicy()
    none = ShellPolicy(decision_cache_entries=0)
    for policy in (kept, none):
        assert judged("ls -la", tmp_path, policy) is Decision.ALLOW
        assert judged("ls -la", tmp_path, policy) is Decision.ALLOW
    assert kept.cached_entries == 1
    assert none.cached_entries == 0


def test_a_text_that_runs_nothing_is_allowed(tmp_path: Path) -> None:
    assert judged("# a comment", tmp_path, ShellPolicy()) is Decision.ALLOW
