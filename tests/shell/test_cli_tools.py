"""Narrow CLI tools (`register_cli`): `git_commit(message)` on a real repository, parameters
as whole argv elements (no shell), option injection refused at validation, the pipeline's
approval and ledger as for any tool."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ErrorCategory, Principal, Proposal, Status
from toolkeeper.contract.model import SideEffect
from toolkeeper.errors import ConfigError
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALLOW_GIT = """
@id("test.allow_git")
permit(principal, action == Toolkeeper::Action::"invoke", resource)
when { resource.id like "git_*" };
"""
AUTHOR = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
    return done.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    return path


@pytest.fixture
def harness(tmp_path: Path, repo: Path) -> Harness:
    harness = Harness(
        home=tmp_path / "tk", policy=CedarPolicyEngine(policies=ALLOW_GIT, include_defaults=False)
    )
    harness.register_cli(
        "git_commit",
        argv=["git", "commit", "-q", "-m", "{message}"],
        cwd=repo,
        description="Commit the staged changes with a message.",
        # The word after -m is always its value, so a message may start with a dash.
        parameters={"message": {"type": "string", "minLength": 1}},
        environment=AUTHOR,
    )
    harness.register_cli(
        "git_show",
        argv=["git", "show", "--stat", "{revision}"],
        cwd=repo,
        description="Show a commit.",
        side_effect=SideEffect.NONE,
    )
    return harness


def call(harness: Harness, name: str, arguments: dict[str, Any], who: Principal) -> Any:
    return harness.invoke_sync(Proposal("c1", name, arguments), principal=who)


def test_git_commit_commits_with_the_message_as_one_argument(
    harness: Harness, repo: Path, alice: Principal
) -> None:
    message = 'fix: it\'s "quoted"; $(touch pwned) `id` && echo no'
    done = call(harness, "git_commit", {"message": message}, alice)
    assert done.status is Status.SUCCEEDED, done
    assert done.structured_content["exit_code"] == 0
    assert git(repo, "log", "-1", "--format=%s").strip() == message
    assert not (repo / "pwned").exists()
    assert done.structured_content["changed"]["count"] > 0  # .git objects were written
    assert "exited 0" in done.summary and "wrote" in done.summary


def test_a_failing_commit_reports_its_exit_code_and_no_change(
    harness: Harness, repo: Path, alice: Principal
) -> None:
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qm", "first")
    nothing = call(harness, "git_commit", {"message": "empty"}, alice)
    assert nothing.status is Status.SUCCEEDED  # the tool ran; the command failed
    assert nothing.structured_content["exit_code"] == 1
    assert nothing.summary.startswith("exited 1 after")
    assert "nothing to commit" in nothing.structured_content["stdout"]
    # git may still refresh its index: the effect is reported as it is, apart from the exit
    changed = nothing.structured_content["changed"]
    paths = changed["created"] + changed["modified"] + changed["deleted"]
    assert all(p.startswith(str(repo / ".git") + "/") for p in paths)
    assert ("changed no file" in nothing.summary) == (not paths)


def test_an_operand_may_not_be_an_option(harness: Harness, repo: Path, alice: Principal) -> None:
    injected = call(harness, "git_show", {"revision": "--output=/tmp/x"}, alice)
    assert injected.status is Status.REJECTED
    assert injected.error.category is ErrorCategory.INVALID_ARGUMENT
    assert "^(?!-)" in injected.error.field_errors[0].message
    # the registrant's schema for the message allows it: after -m it is a value
    done = call(harness, "git_commit", {"message": "--amend"}, alice)
    assert git(repo, "log", "-1", "--format=%s").strip() == "--amend"
    assert done.status is Status.SUCCEEDED


def test_the_cli_tool_writes_nowhere_but_its_root(
    tmp_path: Path, repo: Path, alice: Principal
) -> None:
    harness = Harness(
        home=tmp_path / "tk2",
        policy=CedarPolicyEngine(policies=ALLOW_GIT, include_defaults=False),
    )
    outside = tmp_path / "outside.txt"
    harness.register_cli(
        "git_cp",
        argv=["cp", "a.txt", "{target}"],
        cwd=repo,
        description="Copy a.txt.",
    )
    into_tmp = call(harness, "git_cp", {"target": str(outside)}, alice)
    assert into_tmp.structured_content["exit_code"] == 0  # into the sandbox's private /tmp
    assert not outside.exists() and into_tmp.structured_content["changed"]["count"] == 0
    into_etc = call(harness, "git_cp", {"target": "/etc/tk-cli-escape"}, alice)
    assert into_etc.structured_content["exit_code"] != 0
    assert "Read-only file system" in into_etc.structured_content["stderr"]
    assert not Path("/etc/tk-cli-escape").exists()


def test_the_default_policy_asks_before_a_committing_cli_tool(
    tmp_path: Path, repo: Path, alice: Principal
) -> None:
    harness = Harness(home=tmp_path / "tk3")
    harness.register_cli(
        "git_commit", argv=["git", "commit", "-m", "{message}"], cwd=repo, description="Commit."
    )
    pending = call(harness, "git_commit", {"message": "x"}, alice)
    assert pending.status is Status.PENDING_APPROVAL
    assert git(repo, "rev-list", "--all").strip() == ""


@pytest.mark.parametrize(
    "argv",
    [["{program}", "x"], ["git", "commit", "--message={message}"], []],
)
def test_templates_that_would_not_be_whole_elements_are_refused(
    tmp_path: Path, argv: list[str]
) -> None:
    harness = Harness(home=tmp_path / "tk")
    with pytest.raises(ConfigError):
        harness.register_cli("bad", argv=argv, cwd=tmp_path, description="Bad.")
