"""The `shell` tool end to end: `register_shell`, then proposals through the one pipeline —
per-command effect, the approval's account and binding, one ledger row per command with
its parse summary, refusals, failing closed, timeouts and vendor views."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import EffectState, ErrorCategory, Principal, Proposal, Status
from toolkeeper.adapters import openai_chat
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    (path / "a.txt").write_text("alpha\nbeta\n")
    return path


@pytest.fixture
def harness(tmp_path: Path, root: Path) -> Harness:
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(roots=[root], timeout=5)
    return harness


def run(harness: Harness, command: str, who: Principal, **more: Any) -> Any:
    proposal = Proposal("c1", "shell", {"command": command, **more})
    return harness.invoke_sync(proposal, principal=who)


def row_events(harness: Harness, envelope: Any) -> dict[str, dict[str, Any]]:
    events = harness.ledger.events(envelope.execution_meta.request_id)
    return {e.kind: e.data for e in events}


def test_a_read_only_command_runs_and_its_row_keeps_the_parse(
    harness: Harness, root: Path, alice: Principal
) -> None:
    done = run(harness, "cat a.txt | wc -l", alice)
    assert done.status is Status.SUCCEEDED
    assert done.structured_content["stdout"].strip() == "2"
    assert done.summary.startswith("exited 0 after") and "changed no file" in done.summary
    # The contract declares the worst case; the call records what this command did.
    assert done.execution_meta.effect_state is EffectState.NONE
    analyzed = row_events(harness, done)["analyzed"]
    assert analyzed["side_effect"] == "none"
    assert analyzed["summary"]["summary"] == "[pipeline] 2 commands: cat; wc"
    assert [c["program"] for c in analyzed["summary"]["commands"]] == [
        "/usr/bin/cat",
        "/usr/bin/wc",
    ]
    record = harness.ledger.get(done.execution_meta.request_id)
    assert record is not None and record.contract_ref == "shell@1.0.0"


def test_a_write_waits_for_approval_with_a_sentence_then_runs(
    harness: Harness, root: Path, alice: Principal
) -> None:
    pending = run(harness, "echo hi > out.txt", alice)
    assert pending.status is Status.PENDING_APPROVAL and not (root / "out.txt").exists()
    approval = harness.approvals.get(pending.execution_meta.approval_id)
    assert f"writes files under writable root {root}/out.txt" in approval.account
    assert "runs `echo hi`" in approval.account
    harness.approvals.decide(approval.approval_id, "approve", by="reviewer")
    done = harness.resume_sync(approval.approval_id, principal=alice)
    assert done.status is Status.SUCCEEDED
    assert (root / "out.txt").read_text() == "hi\n"
    assert done.structured_content["changed"]["created"] == [str(root / "out.txt")]
    assert done.execution_meta.effect_state is EffectState.COMMITTED


def test_an_approval_is_bound_to_where_the_words_write(
    harness: Harness, root: Path, tmp_path: Path, alice: Principal
) -> None:
    pending = run(harness, "echo hi > build/out.txt", alice)
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="reviewer")
    (root / "build").symlink_to(root / "a.txt")  # the same words now write elsewhere
    stale = harness.resume_sync(approval_id, principal=alice)
    assert stale.error.category is ErrorCategory.STALE
    assert (root / "a.txt").read_text() == "alpha\nbeta\n"


def test_text_the_analysis_refuses_is_never_run(
    harness: Harness, root: Path, alice: Principal
) -> None:
    refused = run(harness, "touch x\x1b; echo", alice)
    assert refused.status is Status.REJECTED
    assert refused.error.category is ErrorCategory.POLICY_DENIED
    assert "U+001B" in refused.error.message and not (root / "x").exists()
    assert "refused" in row_events(harness, refused)


def test_a_working_directory_outside_the_roots_is_refused(
    harness: Harness, tmp_path: Path, alice: Principal
) -> None:
    refused = run(harness, "ls", alice, cwd=str(tmp_path))
    assert refused.error.category is ErrorCategory.POLICY_DENIED
    assert "not a directory inside the writable roots" in refused.error.message


def test_a_failing_command_is_not_a_failed_call(harness: Harness, alice: Principal) -> None:
    done = run(harness, "ls no-such-file", alice)
    assert done.status is Status.SUCCEEDED
    assert done.structured_content["exit_code"] == 2
    assert "No such file" in done.structured_content["stderr"]
    assert done.summary.startswith("exited 2")


def test_a_timeout_reports_what_was_changed(tmp_path: Path, root: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(roots=[root], timeout=1)
    done = run(harness, "sleep 30", alice)
    assert done.status is Status.FAILED and done.error.category is ErrorCategory.TIMEOUT
    # The roots are unchanged, and they are the only place it could write: known, not unknown.
    assert done.error.effect_committed is False
    # `sleep` is judged read-only, so the call records no effect at all (not "not committed").
    assert done.execution_meta.effect_state is EffectState.NONE
    assert "was killed after its 1 s timeout" in done.error.message


def test_without_a_sandbox_nothing_runs(tmp_path: Path, root: Path, alice: Principal) -> None:
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(roots=[root], bwrap=str(tmp_path / "no-bwrap"))
    failed = run(harness, "cat a.txt", alice)
    assert failed.status is Status.FAILED
    assert failed.error.category is ErrorCategory.UNAVAILABLE
    assert failed.error.effect_committed is False
    assert "nothing ran" in failed.error.message


def test_the_operator_may_allow_running_without_it(
    tmp_path: Path, root: Path, alice: Principal
) -> None:
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(
        roots=[root], bwrap=str(tmp_path / "no-bwrap"), unsandboxed_fallback=True
    )
    done = run(harness, "cat a.txt", alice)
    assert done.status is Status.SUCCEEDED
    assert done.structured_content["sandboxed"] is False
    assert "WITHOUT the sandbox" in done.summary


def test_output_secrets_are_redacted_and_large_output_stored(
    harness: Harness, root: Path, alice: Principal
) -> None:
    harness.redactor.add("tk-live-5f3a9c1e77")
    (root / "log.txt").write_text("key=tk-live-5f3a9c1e77\n" + "line\n" * 5000)
    done = run(harness, "cat log.txt", alice)
    content = done.structured_content
    assert "tk-live" not in content["stdout"] and content["stdout"].startswith("key=[REDACTED]")
    assert "bytes omitted" in content["stdout"]
    whole = harness.artifacts.get(content["stdout_artifact"])
    assert whole.count(b"line\n") == 5000 and b"tk-live" not in whole


def test_the_harness_home_is_hidden_from_commands(
    tmp_path: Path, root: Path, alice: Principal
) -> None:
    harness = Harness(home=root / ".toolkeeper")
    harness.register_shell(roots=[root])
    run(harness, "ls", alice)  # the ledger now exists inside the root
    done = run(harness, "ls -A .toolkeeper", alice)
    assert done.structured_content["stdout"] == ""
    assert os.listdir(root / ".toolkeeper")  # it is there on the host


def test_vendor_views_offer_the_shell_like_any_tool(harness: Harness, alice: Principal) -> None:
    rendered = openai_chat.render(harness.visible_contracts(alice))
    (shell,) = [t for t in rendered if t["function"]["name"] == "shell"]
    assert shell["function"]["parameters"]["required"] == ["command"]
    response = {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "shell", "arguments": '{"command": "pwd"}'},
                        }
                    ]
                }
            }
        ]
    }
    (answer,) = anyio.run(
        lambda: harness.run_tool_calls(response, vendor="openai_chat", principal=alice)
    )
    assert answer["tool_call_id"] == "call_1" and "exited 0" in answer["content"]


@pytest.mark.invariant("INV-6")
def test_shell_commands_pass_all_ten_stages_in_order(
    harness: Harness, root: Path, alice: Principal
) -> None:
    read = run(harness, "ls", alice)
    pending = run(harness, "touch made", alice)
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="reviewer")
    resumed = harness.resume_sync(pending.execution_meta.approval_id, principal=alice)
    for envelope in (read, resumed):
        assert envelope.status is Status.SUCCEEDED
        seen = [e.stage for e in harness.ledger.events(envelope.execution_meta.request_id)]
        assert list(dict.fromkeys(seen)) == list(STAGE_NAMES)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="tk-hidden-"))
    (path / "token").write_text("s3cret")
    yield path
    shutil.rmtree(path)


def test_the_operator_names_what_is_hidden(
    tmp_path: Path, root: Path, outside_tmp: Path, alice: Principal
) -> None:
    shown = Harness(home=tmp_path / "tk1")
    shown.register_shell(roots=[root])
    listing = run(shown, f"ls {outside_tmp}", alice).structured_content["stdout"]
    assert listing == "token\n"  # /var/tmp is neither the home nor hidden by default
    hiding = Harness(home=tmp_path / "tk2")
    hiding.register_shell(roots=[root], hidden=[outside_tmp])
    assert run(hiding, f"ls {outside_tmp}", alice).structured_content["stdout"] == ""
