"""`toolkeeper ledger` and `toolkeeper approvals` against a real ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkeeper import Principal, Proposal, tool
from toolkeeper.cli import main
from toolkeeper.runtime.harness import Harness


@pytest.fixture
def home(tmp_path: Path) -> Path:
    harness = Harness(home=tmp_path)

    @tool(side_effect="none")
    def get_note(note_id: str) -> dict[str, str]:
        """Read a note."""
        return {"note_id": note_id}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=1)
    def delete_note(note_id: str) -> dict[str, str]:
        """Delete a note."""
        return {"deleted": note_id}

    harness.register(get_note)
    harness.register(delete_note)
    bob = Principal("bob")
    harness.invoke_sync(Proposal("c1", "get_note", {"note_id": "n1"}), principal=bob)
    harness.invoke_sync(Proposal("c2", "get_nte", {"note_id": "n1"}), principal=bob)
    harness.invoke_sync(Proposal("c3", "delete_note", {"note_id": "n1"}), principal=bob)
    harness.close()
    return tmp_path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_list_filters_and_formats(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_json(capsys, "ledger", "list", "--home", str(home))
    assert sorted(r["status"] for r in records) == ["pending_approval", "rejected", "succeeded"]
    rejected = run_json(capsys, "ledger", "list", "--home", str(home), "--status", "rejected")
    assert [r["tool"] for r in rejected] == ["get_nte"]
    by_tool = run_json(capsys, "ledger", "list", "--home", str(home), "--tool", "get_note")
    assert [r["call_id"] for r in by_tool] == ["c1"]
    assert run_json(capsys, "ledger", "list", "--home", str(home), "--since", "1h")
    assert main(["ledger", "list", "--home", str(home)]) == 0
    assert "3 invocation(s)" in capsys.readouterr().out


def test_show_prints_every_stage(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [record] = run_json(capsys, "ledger", "list", "--home", str(home), "--status", "succeeded")
    shown = run_json(capsys, "ledger", "show", record["request_id"], "--home", str(home))
    stages = [e["stage"] for e in shown["events"]]
    assert stages[0] == "resolve" and stages[-1] == "record"
    assert main(["ledger", "show", record["request_id"], "--home", str(home)]) == 0
    assert "authorize" in capsys.readouterr().out


def test_bad_input_is_a_clear_error(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "show", "req_nope", "--home", str(home)]) == 2
    assert "no invocation 'req_nope'" in capsys.readouterr().err
    assert main(["ledger", "list", "--home", str(home), "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err
    assert main(["ledger", "list", "--home", str(tmp_path / "empty")]) == 2
    assert "no ledger at" in capsys.readouterr().err
    assert main(["approvals", "approve", "apr_nope", "--home", str(home), "--format", "json"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["error"] == "ApprovalError" and error["approval_id"] == "apr_nope"


def test_approve_from_the_shell_is_recorded_once(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [pending] = run_json(capsys, "approvals", "list", "--home", str(home))
    assert pending["contract_ref"] == "delete_note@1.0.0"
    assert main(["approvals", "show", pending["approval_id"], "--home", str(home)]) == 0
    assert "delete_note@1.0.0" in capsys.readouterr().out
    decided = run_json(
        capsys, "approvals", "approve", pending["approval_id"], "--home", str(home), "--by", "ed"
    )
    assert decided["status"] == "approved" and decided["decided_by"] == "ed"
    assert run_json(capsys, "approvals", "list", "--home", str(home)) == []
    assert main(["approvals", "deny", pending["approval_id"], "--home", str(home)]) == 2
    assert "already approved" in capsys.readouterr().err
