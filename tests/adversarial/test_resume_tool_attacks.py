"""Attacks on the gateway's `toolkeeper.resume`: another principal learns nothing, and the
approval is read off the event loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolkeeper import Principal, ToolContract
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.ledger import ApprovalRecord
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

pytestmark = pytest.mark.anyio


class WatchedLedger(SQLiteLedger):
    """The SQLite ledger, noting which threads read approvals."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.approval_readers: list[int] = []

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        self.approval_readers.append(threading.get_ident())
        return super().get_approval(approval_id)


async def test_resume_by_another_principal_reads_the_ledger_off_the_loop(
    tmp_path: Path,
) -> None:
    """Defect: the gateway looked the approval up itself, a blocking ledger read on the
    event loop (a PostgreSQL round trip stalling every client), before `Harness.resume`
    looked it up again off the loop."""
    ledger = WatchedLedger(tmp_path / "ledger.db")
    policy = CedarPolicyEngine(
        policies='@approval("required") permit(principal, action, resource);',
        include_defaults=False,
    )
    harness = Harness(home=tmp_path, ledger=ledger, policy=policy)
    contract = ToolContract.from_dict(
        {
            "id": "publish",
            "version": "1.0.0",
            "description": "Publish a document.",
            "side_effect": "committing",
            "input_schema": {"type": "object", "properties": {"doc": {"type": "string"}}},
        }
    )
    harness.register(contract, executor=lambda doc: {"doc": doc})
    caller: dict[str, Principal] = {"now": Principal("alice", "acme")}
    server = GatewayServer(harness, principal_of=lambda _request: caller["now"])
    loop_thread = threading.get_ident()
    try:
        async with Client(server.lowlevel) as client:
            pending = await client.call_tool("publish", {"doc": "d"})
            structured: Any = pending.structured_content
            approval_id = structured["execution_meta"]["approval_id"]
            harness.approvals.decide(approval_id, "approve", by="editor")
            ledger.approval_readers.clear()
            caller["now"] = Principal("mallory", "acme")
            stranger = await client.call_tool(RESUME_TOOL, {"approval_id": approval_id})
            assert stranger.is_error
            assert "publish" not in str(stranger.model_dump(mode="json"))
            assert ledger.approval_readers and loop_thread not in ledger.approval_readers
            caller["now"] = Principal("alice", "acme")
            done = await client.call_tool(RESUME_TOOL, {"approval_id": approval_id})
            assert not done.is_error
            assert done.structured_content == {"doc": "d"}
            assert loop_thread not in ledger.approval_readers
    finally:
        harness.close()
