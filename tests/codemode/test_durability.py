"""A paused program survives its process: SIGKILLed after pausing, it is approved and resumed
in a fresh process, each write happening once; a crash inside an inner write leaves that call
and its run_code ``effect_unknown``, and nothing runs it again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Principal, Status
from toolkeeper.runtime.harness import Harness

CHILD = Path(__file__).with_name("durability_child.py")
ALICE = Principal("alice")


def child(home: Path, mode: str, target: str, kill: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(home), mode, target, kill],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if kill == "in_write":
        assert done.returncode == -9, done.stderr
        return {}
    assert done.stdout, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def approve(home: Path, approval_id: str) -> None:
    with Harness(home=home) as harness:
        harness.approvals.decide(approval_id, "approve", by="carol")


def effects(home: Path) -> list[str]:
    path = home / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_killed_after_each_pause_every_write_happens_exactly_once(tmp_path: Path) -> None:
    home = tmp_path / "tk"
    answer = child(home, "run", "3", "after_answer")
    for expected in range(3):
        assert answer["status"] == "pending_approval", answer
        assert len(effects(home)) == expected  # nothing ran while it waited
        approve(home, answer["approval_id"])
        answer = child(home, "resume", answer["approval_id"], "after_answer")
    assert answer["status"] == "succeeded" and answer["value"] == 3
    assert effects(home) == ["row-0", "row-1", "row-2"]


def test_a_crash_inside_an_inner_write_is_effect_unknown_and_never_rerun(tmp_path: Path) -> None:
    home = tmp_path / "tk"
    answer = child(home, "run", "2", "none")
    approval_id = answer["approval_id"]
    approve(home, approval_id)
    child(home, "resume", approval_id, "in_write")  # dies with the effect on disk
    assert effects(home) == ["row-0"]
    harness = Harness(home=home)  # recovers what the dead process left in flight
    harness.open()
    [write] = [r for r in harness.ledger.query(limit=50) if r.tool == "append_line@1.0.0"]
    assert write.status == "effect_unknown" and write.effect_state == "unknown"
    [continuation] = harness.ledger.children(answer["request_id"])[-1:]
    assert continuation.call_id == f"resume-{approval_id}"
    assert continuation.status == "effect_unknown"

    async def again() -> Any:
        return await harness.resume(approval_id, principal=ALICE)

    repeated = anyio.run(again)  # answers the continuation's outcome; runs nothing
    assert repeated.status is Status.EFFECT_UNKNOWN
    assert effects(home) == ["row-0"]
    harness.close()
