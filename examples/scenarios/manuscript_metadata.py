"""Seed 001's teaching case: change a manuscript's metadata, governed end to end.

preview → approval → execute → read-back verify. The `timeout` variant makes the write
outlive its timeout: the call stops at an unknown effect, and reconciliation settles it by
reading the manuscript back. Run with `toolkeeper demo manuscript_metadata`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkeeper import Principal, Proposal, ToolContext, tool
from toolkeeper.executors import ToolFailure
from toolkeeper.runtime.harness import Harness

Trace = Callable[[str], None]


class ManuscriptStore:
    """A tiny JSON-file store standing in for the manuscript system (the world)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        if not path.exists():
            self._write({"m-42": {"title": "Tool Use", "subtitle": "draft", "version": 1}})

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.path)

    def read(self, manuscript_id: str) -> dict[str, Any]:
        data = json.loads(self.path.read_text())
        if manuscript_id not in data:
            raise ToolFailure(
                f"no manuscript {manuscript_id!r}",
                category="not_found",
                suggested_fix="List manuscripts or check the id (e.g. 'm-42').",
            )
        return data[manuscript_id]

    def update(self, manuscript_id: str, fields: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            data = json.loads(self.path.read_text())
            record = data[manuscript_id]
            record.update(fields)
            record["version"] += 1
            self._write(data)
            return record


def build(home: Path, *, write_delay: float = 0.0) -> tuple[Harness, ManuscriptStore]:
    """The harness with the three manuscript tools; `write_delay` slows the write."""
    harness = Harness(home=home)
    store = ManuscriptStore(home / "manuscripts.json")

    @tool(side_effect="none", required_capabilities=["manuscripts"])
    def get_manuscript_metadata(manuscript_id: str) -> dict[str, Any]:
        """Read a manuscript's title, subtitle and version.

        Use when: you need the current metadata before changing it.
        Do not use when: you want to change metadata; preview the change instead.

        Args:
            manuscript_id: The manuscript id, e.g. "m-42".
        """
        return {"manuscript_id": manuscript_id, **store.read(manuscript_id)}

    @tool(side_effect="none", required_capabilities=["manuscripts"])
    def preview_manuscript_metadata_update(
        manuscript_id: str, title: str | None = None, subtitle: str | None = None
    ) -> dict[str, Any]:
        """Show what an update would change, without changing anything.

        Use when: before update_manuscript_metadata, to show the user the exact change.
        Do not use when: the change is already approved; call the update.

        Args:
            manuscript_id: The manuscript id, e.g. "m-42".
            title: The new title, if it changes.
            subtitle: The new subtitle, if it changes.
        """
        current = store.read(manuscript_id)
        proposed = {k: v for k, v in (("title", title), ("subtitle", subtitle)) if v is not None}
        return {
            "manuscript_id": manuscript_id,
            "changes": {k: {"from": current[k], "to": v} for k, v in proposed.items()},
            "base_version": current["version"],
        }

    def read_back(arguments: dict[str, Any], context: ToolContext) -> bool:
        record = store.read(arguments["manuscript_id"])
        return all(record[k] == arguments[k] for k in ("title", "subtitle") if arguments.get(k))

    def manuscript_version(arguments: dict[str, Any], context: ToolContext) -> dict[str, str]:
        record = store.read(arguments["manuscript_id"])
        return {arguments["manuscript_id"]: str(record["version"])}

    @tool(
        version="1.0.0",
        side_effect="committing",
        idempotency="keyed",
        timeout=0.5,
        verifier="manuscript_read_back",
        required_capabilities=["manuscripts"],
        concurrency={"write_set": ["manuscript:{manuscript_id}"]},
    )
    def update_manuscript_metadata(
        manuscript_id: str, title: str | None = None, subtitle: str | None = None
    ) -> dict[str, Any]:
        """Change a manuscript's title or subtitle.

        Use when: the user approved a previewed change.
        Do not use when: you have not previewed the change.

        Args:
            manuscript_id: The manuscript id, e.g. "m-42".
            title: The new title.
            subtitle: The new subtitle.
        """
        if write_delay:
            time.sleep(write_delay)
        fields = {k: v for k, v in (("title", title), ("subtitle", subtitle)) if v is not None}
        return {"manuscript_id": manuscript_id, **store.update(manuscript_id, fields)}

    harness.register_verifier("manuscript_read_back", read_back)
    harness.register(get_manuscript_metadata)
    harness.register(preview_manuscript_metadata_update)
    harness.register(update_manuscript_metadata, resource_version=manuscript_version)
    return harness, store


EDITOR = Principal("agent-7", tenant="press", capabilities=frozenset({"manuscripts"}))


def run(home: Path, trace: Trace = print, *, variant: str = "approved") -> dict[str, Any]:
    """Run the scenario; returns the statuses seen, for tests."""
    harness, store = build(home, write_delay=0.8 if variant == "timeout" else 0.0)
    seen: dict[str, Any] = {}
    # A fresh session per run: the update's idempotency key includes it, so a second demo
    # run makes a new change instead of replaying the first run's recorded outcome.
    session = f"demo-{uuid.uuid4().hex[:8]}"

    def step(label: str, proposal: Proposal) -> Any:
        envelope = harness.invoke_sync(proposal, principal=EDITOR, session=session)
        trace(f"\n▶ {label}: {proposal.tool}({json.dumps(proposal.arguments)})")
        trace("  " + envelope.to_model_text().replace("\n", "\n  "))
        seen[label] = envelope.status.value
        return envelope

    step("read", Proposal("c1", "get_manuscript_metadata", {"manuscript_id": "m-42"}))
    change = {"manuscript_id": "m-42", "title": "Governed Tool Use"}
    step("preview", Proposal("c2", "preview_manuscript_metadata_update", change))
    pending = step("update", Proposal("c3", "update_manuscript_metadata", change))
    approval_id = pending.execution_meta.approval_id
    trace(f"\n✋ a human approves {approval_id}: {harness.approvals.get(approval_id).account}")
    harness.approvals.decide(approval_id, "approve", by="editor", reason="matches the preview")
    resumed = harness.resume_sync(approval_id, principal=EDITOR)
    trace(f"\n▶ resume {approval_id}")
    trace("  " + resumed.to_model_text().replace("\n", "\n  "))
    seen["resume"] = resumed.status.value
    if variant == "timeout":
        trace("\n⏸ the write timed out; its effect is unknown, so the run stops here.")
        time.sleep(1.0)  # the abandoned write finishes in the background meanwhile
        settled = harness.reconcile_sync().settled
        for record in settled:
            trace(f"🔎 reconcile {record.request_id}: read-back → {record.status}")
        seen["reconcile"] = [r.status for r in settled]
    seen["title"] = store.read("m-42")["title"]
    seen["request_id"] = resumed.execution_meta.request_id
    trace(f"\nledger: toolkeeper ledger show {resumed.execution_meta.request_id} --home {home}")
    harness.close()
    return seen
