"""Seed 000 §12's TASK2048: tests fail, the agent patches the branch, then asks to merge.

The operator's policy grants branch edits only. The merge request is denied by policy, the
trajectory records the denial, and the merge executor runs zero times. Run with
`toolkeeper demo task2048`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkeeper import Principal, Proposal, tool
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

Trace = Callable[[str], None]

BRANCH_EDITS_ONLY = """
@id("task2048.branch_edits")
permit(principal, action == Toolkeeper::Action::"invoke", resource)
when {
  resource.id == "apply_patch" &&
  context.arguments has branch && context.arguments.branch == "task2048"
};

@id("task2048.no_merge")
forbid(principal, action, resource) when { resource.id == "create_merge_request" };
"""


def run(home: Path, trace: Trace = print) -> dict[str, Any]:
    harness = Harness(home=home, policy=CedarPolicyEngine(policies=BRANCH_EDITS_ONLY))
    repo = {"patches": [], "merges": 0}

    @tool(side_effect="none")
    def run_tests(branch: str) -> dict[str, Any]:
        """Run the test suite on a branch and return the failures.

        Args:
            branch: The branch to test, e.g. "task2048".
        """
        if "fix-off-by-one" in repo["patches"]:
            return {"passed": 12, "failed": 0, "log": ""}
        return {"passed": 11, "failed": 1, "log": "test_merge_tiles: expected 4, got 2"}

    @tool(version="1.0.0", side_effect="reversible", idempotency="natural", timeout=5)
    def apply_patch(branch: str, patch: str) -> dict[str, Any]:
        """Apply a patch to a working branch (reversible: the branch can be reset).

        Args:
            branch: The branch to change; only the task branch is allowed.
            patch: The patch name or unified diff.
        """
        repo["patches"].append(patch)
        return {"branch": branch, "applied": patch}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=5)
    def create_merge_request(branch: str, target: str) -> dict[str, Any]:
        """Open a merge request from a branch into a target branch.

        Args:
            branch: The source branch.
            target: The branch to merge into, e.g. "main".
        """
        repo["merges"] += 1
        return {"merge_request": 1}

    for fn in (run_tests, apply_patch, create_merge_request):
        harness.register(fn)
    agent = Principal("task2048-agent", tenant="games")
    trajectory = []
    for call_id, name, arguments in (
        ("t1", "run_tests", {"branch": "task2048"}),
        ("t2", "apply_patch", {"branch": "task2048", "patch": "fix-off-by-one"}),
        ("t3", "run_tests", {"branch": "task2048"}),
        ("t4", "create_merge_request", {"branch": "task2048", "target": "main"}),
    ):
        envelope = harness.invoke_sync(Proposal(call_id, name, arguments), principal=agent)
        trace(f"\n▶ {name}({json.dumps(arguments)})")
        trace("  " + envelope.to_model_text().replace("\n", "\n  "))
        trajectory.append((name, envelope.status.value, envelope))
    denied = trajectory[-1][2]
    request_id = denied.execution_meta.request_id
    trace(f"\nmerge executor ran {repo['merges']} time(s); the denial is in the ledger:")
    for event in harness.ledger.events(request_id):
        trace(f"  {event.stage:<10} {event.kind:<14} {json.dumps(event.data)}")
    harness.close()
    return {
        "trajectory": [(name, status) for name, status, _ in trajectory],
        "merges": repo["merges"],
        "denial": denied.error.category.value if denied.error else None,
        "denied_request_id": request_id,
    }
