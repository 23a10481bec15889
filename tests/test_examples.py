"""The shipped scenarios (examples/scenarios) are tests too, and `toolkeeper demo` runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.cli.demo import load_scenario
from toolkeeper.ledger.sqlite import SQLiteLedger

ROOT = Path(__file__).resolve().parent.parent


def test_manuscript_metadata_preview_approve_execute_verify(tmp_path: Path) -> None:
    seen = load_scenario("manuscript_metadata").run(tmp_path, lambda _: None)
    assert seen["read"] == "succeeded"
    assert seen["preview"] == "succeeded"
    assert seen["update"] == "pending_approval"
    assert seen["resume"] == "succeeded"
    assert seen["title"] == "Governed Tool Use"
    events = SQLiteLedger(tmp_path / "ledger.db").events(seen["request_id"])
    assert ("check", "read_back") in [(e.stage, e.kind) for e in events]


def test_manuscript_metadata_timeout_stops_at_unknown_until_reconciled(tmp_path: Path) -> None:
    seen = load_scenario("manuscript_metadata").run(tmp_path, lambda _: None, variant="timeout")
    assert seen["resume"] == "timed_out"
    assert seen["reconcile"] == ["succeeded"]
    record = SQLiteLedger(tmp_path / "ledger.db").get(seen["request_id"])
    assert record.status == "succeeded" and record.effect_state == "committed"


def test_task2048_merge_is_denied_and_never_executed(tmp_path: Path) -> None:
    result = load_scenario("task2048").run(tmp_path, lambda _: None)
    assert result["trajectory"] == [
        ("run_tests", "succeeded"),
        ("apply_patch", "succeeded"),
        ("run_tests", "succeeded"),
        ("create_merge_request", "rejected"),
    ]
    assert result["denial"] == "policy_denied"
    assert result["merges"] == 0
    events = SQLiteLedger(tmp_path / "ledger.db").events(result["denied_request_id"])
    kinds = [(e.stage, e.kind) for e in events]
    assert ("authorize", "deny") in kinds
    assert not any(stage == "dispatch" for stage, _ in kinds)


def test_demo_command_prints_a_trace(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolkeeper", "demo", "task2048", "--home", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "create_merge_request" in out and "policy_denied" in out
    assert "merge executor ran 0 time(s)" in out


def test_code_mode_spreadsheet_keeps_rows_out_of_context_and_pauses_the_write(
    tmp_path: Path,
) -> None:
    seen = load_scenario("code_mode").run(tmp_path, lambda _: None)
    summary = seen["summary"].structured_content
    assert summary["value"] == {"total": 10000, "active": 4000}
    assert summary["stdout"].startswith("10000 rows, 4000 active\n")
    assert seen["native_tokens"] >= 75 * seen["code_tokens"]  # seed 003: 150K -> 2K
    assert seen["paused"].status.value == "pending_approval"
    assert seen["done"].status.value == "succeeded"
    assert seen["writes"] == 1 and seen["tagged"] == 4000


APPROVALS = ROOT / "examples" / "approvals"


def answered(vendor: str, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(call id or tool name, answer text) per call in `vendor`'s answer messages."""
    if vendor == "anthropic_messages":
        return [(b["tool_use_id"], b["content"][0]["text"]) for b in messages[0]["content"]]
    if vendor == "openai_chat":
        return [(m["tool_call_id"], m["content"]) for m in messages]
    if vendor == "openai_responses":
        return [(i["call_id"], i["output"]) for i in messages]
    replies = [part["function_response"] for part in messages[0]["parts"]]
    return [(r["name"], r["response"]["output"]["text"]) for r in replies]


@pytest.mark.parametrize(
    ("example", "call_id"),
    [
        ("anthropic_messages", "toolu_1"),
        ("openai_chat", "call_1"),
        ("openai_responses", "call_1"),
        ("gemini", "cancel_order"),  # Gemini sent no id: the answer goes by name
    ],
)
def test_approval_example_answers_the_model_with_the_approved_outcome(
    example: str, call_id: str, tmp_path: Path
) -> None:
    # Twice, in one home: an approved cancellation never stands in for the next one.
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, str(APPROVALS / f"{example}.py")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        [(answered_id, text)] = answered(example, json.loads(out))
        assert answered_id == call_id
        assert text.startswith("status: succeeded\n") and "approval_id: apr_" in text
    ledger = SQLiteLedger(tmp_path / ".toolkeeper" / "approvals" / "ledger.db")
    records = ledger.query(tool="cancel_order")
    assert [(r.status, r.approval_id is not None) for r in records] == [("succeeded", True)] * 2
    ledger.close()
