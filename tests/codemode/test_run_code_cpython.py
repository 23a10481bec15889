"""The CPython tier through run_code: an approval pause aborts the sandbox, and resume
replays the recorded inner calls (no tool runs for them) before the approved one; a program
that asks something else on the way has diverged and stops before any call of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import Principal, Status, tool
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice")


def build(home: Path, effects: dict[str, list[Any]]) -> Harness:
    harness = Harness(home=home)

    @tool(side_effect="none")
    def get_rows(n: int) -> list[int]:
        """Rows."""
        effects["reads"].append(n)
        return list(range(n))

    @tool(side_effect="committing", version="1.0.0")
    def send(to: str) -> dict[str, bool]:
        """Send."""
        effects["sent"].append(to)
        return {"ok": True}

    harness.register(get_rows)
    harness.register(send)
    return harness


def run(harness: Harness, code: str) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await harness.run_code(code, principal=ALICE, tier="cpython")

    return anyio.run(main)


def resume(harness: Harness, approval_id: str) -> ResultEnvelope:
    return harness.resume_sync(approval_id, principal=ALICE)


def test_resume_replays_the_recorded_calls_and_runs_only_the_approved_one(
    tmp_path: Path,
) -> None:
    effects: dict[str, list[Any]] = {"reads": [], "sent": []}
    harness = build(tmp_path / "tk", effects)
    code = "rows = get_rows(5)\nprint('rows', rows)\nsend('x@y')\nprint('sent')\nsum(rows)"
    paused = run(harness, code)
    assert paused.status is Status.PENDING_APPROVAL, paused
    approval_id = paused.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="carol")
    done = resume(harness, approval_id)
    assert done.status is Status.SUCCEEDED, done
    assert done.structured_content["value"] == 10
    assert done.structured_content["stdout"] == "rows [0, 1, 2, 3, 4]\nsent\n"
    assert effects == {"reads": [5], "sent": ["x@y"]}  # the read was replayed, not re-run
    harness.close()


def test_a_program_that_diverges_on_replay_stops_before_its_calls(tmp_path: Path) -> None:
    effects: dict[str, list[Any]] = {"reads": [], "sent": []}
    harness = build(tmp_path / "tk", effects)
    code = "import time\nget_rows(time.time_ns() % 100000 + 1)\nsend('x@y')"
    paused = run(harness, code)
    assert paused.status is Status.PENDING_APPROVAL, paused
    approval_id = paused.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="carol")
    done = resume(harness, approval_id)
    assert done.status is Status.FAILED
    assert "diverged" in done.error.message
    assert effects["sent"] == [] and len(effects["reads"]) == 1
    harness.close()


def test_an_operator_chooses_the_tier_per_principal(tmp_path: Path) -> None:
    """`code_tiers`: bob's programs run in CPython, everyone else's in Monty, when run_code
    names no tier; a call that names one keeps it."""
    harness = Harness(home=tmp_path / "tk", code_tiers={"bob": "cpython"})
    program = "import platform\nplatform.python_implementation()"

    async def main(principal: Principal, tier: str | None = None) -> ResultEnvelope:
        return await harness.run_code(program, principal=principal, tier=tier)

    try:
        bob = anyio.run(main, Principal("bob"))
        assert bob.status is Status.SUCCEEDED, bob
        assert bob.structured_content["value"] == "CPython"
        alice = anyio.run(main, ALICE)  # Monty has no platform module
        assert alice.status is Status.FAILED
        assert alice.structured_content["error"]["type"] == "ModuleNotFoundError"
        named = anyio.run(main, Principal("bob"), "monty")
        assert named.structured_content["error"]["type"] == "ModuleNotFoundError"
    finally:
        harness.close()


def test_a_tier_outside_the_known_ones_is_a_configuration_error(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path / "tk", code_tiers={"*": "pypy"})
    try:
        with pytest.raises(ConfigError, match=r"code_tiers\['\*'\] is 'pypy'"):
            harness.code_mode()
    finally:
        harness.close()
