"""Child process of test_approvals_crash.py: resumes one approved call and SIGKILLs itself
at a chosen point of that resume, as a crashed gateway replica would stop.

    python approvals_child.py LEDGER APPROVAL_ID EFFECTS KILL

LEDGER is a SQLite file path or ``postgresql://...#schema``; KILL is ``before_intent`` (in
the resource-version reader, which runs after the resume has begun and before the intent
is written) or ``after_effect`` (in the executor, once the effect is on disk).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from toolkeeper import Principal, ToolContract
from toolkeeper.ledger import Ledger
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

WRITES_NEED_APPROVAL = """
@id("t.reads") permit(principal, action, resource) when { resource.side_effect == "none" };
@id("t.writes") @approval("required")
permit(principal, action, resource) when { resource.side_effect != "none" };
"""
ALICE = Principal("alice", "acme", frozenset({"docs"}))
PUBLISH = ToolContract.from_dict(
    {
        "id": "publish",
        "version": "1.0.0",
        "description": "Publish a document.",
        "side_effect": "committing",
        "idempotency": "none",
        "required_capabilities": ["docs"],
        "input_schema": {"type": "object", "properties": {"doc": {"type": "string"}}},
    }
)


def open_ledger(spec: str) -> Ledger:
    if spec.startswith("postgresql://"):
        from toolkeeper.ledger.postgres import PostgresLedger

        dsn, _, schema = spec.rpartition("#")
        return PostgresLedger(dsn, schema=schema)
    return SQLiteLedger(spec)


def harness_for(spec: str, home: Path, effects: Path, kill: str | None) -> Harness:
    """The harness of one replica; `kill` names where it dies, None for a healthy one."""
    policy = CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False)
    harness = Harness(home=home, ledger=open_ledger(spec), policy=policy)

    def publish(doc: str) -> dict[str, Any]:
        with effects.open("a") as fh:
            fh.write(doc + "\n")
        if kill == "after_effect":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"doc": doc}

    def versions(arguments: dict[str, Any], context: Any) -> dict[str, str]:
        if kill == "before_intent":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"doc": "v1"}

    harness.register(PUBLISH, executor=publish, resource_version=versions)
    return harness


def main(spec: str, approval_id: str, effects: Path, kill: str) -> int:
    harness = harness_for(spec, effects.parent / f"child-{os.getpid()}", effects, kill)
    harness.resume_sync(approval_id, principal=ALICE)
    return 0  # not reached: the child kills itself first


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]))
