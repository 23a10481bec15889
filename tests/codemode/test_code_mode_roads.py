"""Code Mode with the other roads to a tool: the governed shell (each command a governed
inner call, judged by what it does) and discovery (search_tools from inside a program, then
the SDK of just the tools it found)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Principal, Status, tool
from toolkeeper.discovery import MetaTools
from toolkeeper.runtime.envelope import EffectState, ResultEnvelope
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice")


def run(harness: Harness, code: str) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await harness.run_code(code, principal=ALICE)

    return anyio.run(main)


SHELL_PROGRAM = """
lines = shell("cat a.txt | wc -l")["stdout"].strip()
print("lines", lines)
shell("echo hi > out.txt")
print("wrote")
lines
"""


def test_a_program_runs_read_only_commands_and_pauses_at_a_write(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    harness = Harness(home=tmp_path / "tk")
    harness.register_shell(roots=[root], timeout=5)
    try:
        paused = run(harness, SHELL_PROGRAM)
        assert paused.status is Status.PENDING_APPROVAL, paused
        content = paused.structured_content
        assert content["stdout"] == "lines 2\n"
        assert content["paused_at"]["tool"] == "shell@1.0.0"
        assert not (root / "out.txt").exists()
        approval = harness.approvals.get(paused.execution_meta.approval_id)
        # The approver reads the command's own account, inside the program's.
        assert "Code Mode program" in approval.account
        assert f"writes files under writable root {root}/out.txt" in approval.account
        [read] = [c for c in content["calls"] if c["status"] == "succeeded"]
        row = harness.ledger.get(read["request_id"])
        assert row is not None and row.contract_ref == "shell@1.0.0"
        assert row.parent_request_id == paused.execution_meta.request_id
        analyzed = {e.kind: e.data for e in harness.ledger.events(read["request_id"])}
        assert analyzed["analyzed"]["side_effect"] == "none"
        assert read["effect_state"] == "none"  # a read-only command records no effect
        assert content["effects"]["committed"] == content["effects"]["unknown"] == 0

        harness.approvals.decide(approval.approval_id, "approve", by="reviewer")
        done = harness.resume_sync(approval.approval_id, principal=ALICE)
        assert done.status is Status.SUCCEEDED, done
        assert done.structured_content["value"] == "2"
        assert done.structured_content["stdout"] == "lines 2\nwrote\n"
        assert (root / "out.txt").read_text() == "hi\n"
        assert done.structured_content["effects"]["committed"] == 1
        assert done.execution_meta.effect_state is EffectState.COMMITTED
    finally:
        harness.close()


def test_a_program_searches_the_tools_and_the_sdk_narrows_to_the_found_ones(
    tmp_path: Path,
) -> None:
    harness = Harness(home=tmp_path / "tk")

    @tool(side_effect="none")
    def get_invoice(invoice_id: str) -> dict[str, Any]:
        """Read one invoice: its amount, customer and status."""
        return {"id": invoice_id, "amount": 12}

    @tool(side_effect="none")
    def list_calendar_events(day: str) -> list[str]:
        """The calendar's events on one day."""
        return []

    @tool(side_effect="none", required_capabilities=["finance"])
    def void_invoice_ledger() -> list[str]:
        """Hidden from alice: the invoice ledger's voided entries."""
        return []

    for fn in (get_invoice, list_calendar_events, void_invoice_ledger):
        harness.register(fn)
    MetaTools(harness)
    try:
        found = run(harness, '[t["name"] for t in search_tools("read an invoice", k=2)["tools"]]')
        assert found.status is Status.SUCCEEDED, found
        names = found.structured_content["value"]
        assert names[0] == "get_invoice" and "void_invoice_ledger" not in names
        [inner] = found.structured_content["calls"]
        assert inner["tool"] == "search_tools@1.0.0" and inner["status"] == "succeeded"
        row = harness.ledger.get(inner["request_id"])
        assert row is not None and row.parent_request_id == found.execution_meta.request_id

        sdk = harness.sdk_text(ALICE, tools=names[:1])
        assert "def get_invoice(invoice_id: str)" in sdk
        assert "list_calendar_events" not in sdk and "search_tools" not in sdk
        used = run(harness, 'get_invoice("inv-7")["amount"]')
        assert used.structured_content["value"] == 12
    finally:
        harness.close()
