"""Child process of tests/runtime/test_reliability.py: committing, keyed invocations whose
effect appends one line to a file. The parent SIGKILLs it at random points of its progress and
starts it again; at every start the harness recovers unfinished calls and reconciles them by
reading the file.

Progress goes to stdout, one line per step, flushed: `start` once the harness is built (before
recovery), then the index of each finished call. The parent picks its kill moments from it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from toolkeeper import Principal, Proposal, ToolContext, ToolContract
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALLOW = """
@id("reliability.allow_append")
permit(principal, action, resource) when { resource.id == "append_line" };
"""


def main(home: Path, effects: Path, count: int) -> int:
    harness = Harness(home=home, policy=CedarPolicyEngine(policies=ALLOW, include_defaults=False))
    print("start", flush=True)

    def append_line(line: str, context: ToolContext) -> dict[str, Any]:
        with effects.open("a") as fh:
            fh.write(line + "\n")
        return {"line": line}

    def read_back(arguments: dict[str, Any], context: ToolContext) -> bool:
        if not effects.exists():
            return False
        return arguments["line"] in effects.read_text().splitlines()

    contract = ToolContract(
        id="append_line",
        version="1.0.0",
        description="Append one line to the effects file.",
        side_effect="committing",
        idempotency="keyed",
        timeout=5,
        verifier="read_back",
        input_schema={
            "type": "object",
            "properties": {"line": {"type": "string"}},
            "required": ["line"],
            "additionalProperties": False,
        },
    )
    harness.register_verifier("read_back", read_back)
    harness.register(contract, executor=append_line)
    harness.reconcile_sync()
    principal = Principal("worker", capabilities=frozenset())
    for i in range(count):
        proposal = Proposal(
            f"call-{i}", "append_line", {"line": f"line-{i}"}, idempotency_key=f"key-{i}"
        )
        envelope = harness.invoke_sync(proposal, principal=principal)
        if envelope.status.value not in ("succeeded", "failed"):
            print(f"{i} {envelope.status.value}", file=sys.stderr)
        print(i, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
