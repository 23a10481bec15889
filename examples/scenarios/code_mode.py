"""Seed 003's Code-Over-API spreadsheet: 10,000 rows, keep the active ones, report counts and
five examples — then tag the active contacts, a write that waits for a human.

Natively every row would pass through the model's context; in Code Mode the rows stay in the
sandbox and only the printed summary and the return value come back. Every call the program
makes is still a governed call in the ledger, and the write pauses the program until an
approver decides; `resume` continues it exactly there. Run with `toolkeeper demo code_mode`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from typing_extensions import TypedDict

from toolkeeper import Principal, adapters, tool
from toolkeeper.lint.surface import count_tokens
from toolkeeper.runtime.harness import Harness

Trace = Callable[[str], None]
ROWS = 10_000
ANALYST = Principal("analyst", tenant="acme")

SUMMARY_PROGRAM = """\
rows = get_rows("contacts")
active = [r for r in rows if r["status"] == "active"]
print(f"{len(rows)} rows, {len(active)} active")
print("first five active:", [(r["id"], r["email"]) for r in active[:5]])
{"total": len(rows), "active": len(active)}
"""

TAG_PROGRAM = """\
rows = get_rows("contacts")
ids = [r["id"] for r in rows if r["status"] == "active"]
result = tag_contacts(ids, "q3-campaign")
print(f"tagged {result['tagged']} contacts")
result["tagged"]
"""


class Row(TypedDict):
    id: int
    email: str
    name: str
    status: str
    signed_up: str
    notes: str


def spreadsheet(n: int = ROWS) -> list[Row]:
    """The sheet: deterministic rows, about 40% of them active."""
    return [
        {
            "id": i,
            "email": f"contact{i}@example.com",
            "name": f"Contact {i}",
            "status": "active" if i % 5 in (1, 3) else "inactive",
            "signed_up": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}",
            "notes": "prefers email; quarterly newsletter",
        }
        for i in range(n)
    ]


def build(home: Path) -> tuple[Harness, dict[str, Any]]:
    """A harness with the sheet's tools; `crm` counts what the write did."""
    harness = Harness(home=home)
    sheet = spreadsheet()
    crm: dict[str, Any] = {"tagged": set(), "writes": 0}

    @tool(side_effect="none", idempotency="natural")
    def get_rows(sheet_id: str) -> list[Row]:
        """Every row of a spreadsheet.

        Use when: you need the rows themselves, to filter or aggregate them.

        Args:
            sheet_id: The spreadsheet, e.g. "contacts".
        """
        return sheet

    @tool(version="1.0.0", side_effect="committing", idempotency="none")
    def tag_contacts(ids: list[int], tag: str) -> dict[str, int]:
        """Tag contacts in the CRM.

        Use when: the user asked to tag or segment contacts.
        Do not use when: you only need to read them.

        Args:
            ids: The contact ids.
            tag: The tag to add, e.g. "q3-campaign".
        """
        crm["writes"] += 1
        crm["tagged"].update(ids)
        return {"tagged": len(ids)}

    harness.register(get_rows)
    harness.register(tag_contacts)
    return harness, crm


def native_context(harness: Harness) -> str:
    """What the model reads natively: the tool definitions, its call, the whole result."""
    tools = adapters.render(
        [c for c in harness.visible_contracts(ANALYST) if c.id != "toolkeeper.run_code"],
        vendor="openai_chat",
    )
    call = {"name": "get_rows", "arguments": json.dumps({"sheet_id": "contacts"})}
    result = {"result": spreadsheet()}
    return "\n".join(json.dumps(part) for part in (tools, call, result))


def code_mode_context(harness: Harness, envelope: Any) -> str:
    """What the model reads in Code Mode: run_code with its SDK, the program, the answer."""
    tool_definition = adapters.render(
        [harness.code_mode().view_contract(ANALYST)], vendor="openai_chat"
    )
    call = {"name": "toolkeeper_run_code", "arguments": json.dumps({"code": SUMMARY_PROGRAM})}
    answer = envelope.structured_content
    return "\n".join(json.dumps(part) for part in (tool_definition, call, answer))


def run(home: Path, trace: Trace = print) -> dict[str, Any]:
    harness, crm = build(home)

    async def summarize() -> Any:
        return await harness.run_code(SUMMARY_PROGRAM, principal=ANALYST)

    summary = anyio.run(summarize)
    content = summary.structured_content
    trace(f"1. the program ran: {summary.status.value}")
    for line in content["stdout"].splitlines():
        trace(f"   printed: {line[:110]}")
    trace(
        f"   value: {content['value']}; inner calls: {content['calls_total']}, each in the ledger"
    )
    native = native_context(harness)
    coded = code_mode_context(harness, summary)
    (native_tokens, how), (code_tokens, _) = count_tokens(native), count_tokens(coded)
    trace(
        f"   tokens the model reads ({how}): native {native_tokens:,}, Code Mode "
        f"{code_tokens:,} ({native_tokens / code_tokens:.0f}x fewer)"
    )

    async def tag() -> Any:
        return await harness.run_code(TAG_PROGRAM, principal=ANALYST)

    paused = anyio.run(tag)
    approval_id = paused.execution_meta.approval_id
    trace(f"2. the write waits for a human: {paused.status.value}, approval {approval_id}")
    account = harness.approvals.get(approval_id).account
    for line in account.splitlines():
        trace(f"   approver reads: {line[:110]}{'…' if len(line) > 110 else ''}")
    harness.approvals.decide(approval_id, "approve", by="operator")
    harness.close()

    # A fresh harness — as after a restart — continues the program at the paused call.
    again, crm_after = build(home)
    crm_after["tagged"], crm_after["writes"] = crm["tagged"], crm["writes"]

    async def resume() -> Any:
        return await again.resume(approval_id, principal=ANALYST)

    done = anyio.run(resume)
    trace(
        f"3. resumed in a fresh harness: {done.status.value}, "
        f"value {done.structured_content['value']}"
    )
    trace(
        f"   the CRM saw {crm_after['writes']} write(s), "
        f"tagging {len(crm_after['tagged'])} contacts"
    )
    trace(f"   ledger: toolkeeper ledger show {paused.execution_meta.request_id} --home {home}")
    again.close()
    return {
        "summary": summary,
        "paused": paused,
        "done": done,
        "writes": crm_after["writes"],
        "tagged": len(crm_after["tagged"]),
        "native_tokens": native_tokens,
        "code_tokens": code_tokens,
    }
