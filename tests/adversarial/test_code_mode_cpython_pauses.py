"""Attacks on the CPython tier's pauses: programs that put several calls needing approval in
flight at once, try to slip a write past a paused call, resume the approvals out of order, or
change a gathered call on resume. No approval may be left without its program, no write may
run before the calls ahead of it are answered, and no call may run twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Principal, Status, tool
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice")
GATED = (
    '@approval("required")\n'
    'permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)'
    ' when { resource.id == "peek" };'
)


def harness(home: Path, effects: dict[str, list[Any]]) -> Harness:
    made = Harness(home=home, policy=CedarPolicyEngine(policies=GATED))

    @tool(side_effect="none")
    def peek(key: str) -> str:
        """A read an approver must allow."""
        effects["peeks"].append(key)
        return key.upper()

    @tool(side_effect="committing", version="1.0.0")
    def send(to: str) -> dict[str, bool]:
        """A write (approval by default)."""
        effects["sent"].append(to)
        return {"ok": True}

    made.register(peek)
    made.register(send)
    return made


def run(made: Harness, code: str) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await made.run_code(code, principal=ALICE, tier="cpython")

    return anyio.run(main)


def resume(made: Harness, approval_id: str) -> ResultEnvelope:
    return made.resume_sync(approval_id, principal=ALICE)


def test_five_gathered_approvals_resumed_out_of_order_are_refused_durably_and_none_is_lost(
    tmp_path: Path,
) -> None:
    effects: dict[str, list[Any]] = {"peeks": [], "sent": []}
    made = harness(tmp_path / "tk", effects)
    code = (
        "import asyncio\n"
        "async def main():\n"
        "    keys = await asyncio.gather(*[peek(k) for k in 'abcde'])\n"
        "    await send(''.join(keys))\n"
        "    return keys\n"
        "await main()"
    )
    paused = run(made, code)
    assert paused.status is Status.PENDING_APPROVAL, paused
    first = paused.execution_meta.approval_id
    # Every read that started before the first pause asked (how many started depends on how
    # fast their frames crossed; the rest ask when the program is continued).
    approvals = {a.approval_id for a in made.approvals.list()}
    assert first in approvals and effects == {"peeks": [], "sent": []}
    for approval_id in approvals:
        made.approvals.decide(approval_id, "approve", by="carol")
    for queued in sorted(approvals - {first}):
        refused = resume(made, queued)
        assert refused.status is Status.FAILED and first in refused.error.message
    made.close()

    again = harness(tmp_path / "tk", effects)  # a fresh process: the notes are in the ledger
    for queued in sorted(approvals - {first}):
        refused = resume(again, queued)
        assert refused.status is Status.FAILED and first in refused.error.message
    assert effects == {"peeks": [], "sent": []}
    step, asked = resume(again, first), [first]
    while step.status is Status.PENDING_APPROVAL:
        approval_id = step.execution_meta.approval_id
        assert approval_id not in asked  # each approval waited on once, none asked again
        asked.append(approval_id)
        if approval_id not in approvals:
            again.approvals.decide(approval_id, "approve", by="carol")
        step = resume(again, approval_id)
    assert step.status is Status.SUCCEEDED, step
    assert step.structured_content["value"] == list("ABCDE")
    assert sorted(effects["peeks"]) == list("abcde") and effects["sent"] == ["ABCDE"]
    assert approvals <= set(asked) and len(asked) == 6  # five reads and the write, once each
    assert again.approvals.list() == []
    again.close()


def test_a_background_task_cannot_slip_a_write_past_a_paused_call(tmp_path: Path) -> None:
    """The program pauses on a read; a task it started keeps trying to write meanwhile. No
    write is proposed while the program is paused — not even one asking for approval."""
    effects: dict[str, list[Any]] = {"peeks": [], "sent": []}
    made = harness(tmp_path / "tk", effects)
    code = (
        "import asyncio\n"
        "async def spam():\n"
        "    await asyncio.sleep(0.2)\n"
        "    for n in range(20):\n"
        "        try:\n"
        "            await send(f'spam{n}')\n"
        "        except Exception:\n"
        "            pass\n"
        "async def main():\n"
        "    task = asyncio.create_task(spam())\n"
        "    value = await peek('a')\n"
        "    task.cancel()\n"
        "    return value\n"
        "await main()"
    )
    try:
        paused = run(made, code)
        assert paused.status is Status.PENDING_APPROVAL, paused
        assert [a.contract_ref.split("@")[0] for a in made.approvals.list()] == ["peek"]
        assert [c["function"] for c in paused.structured_content["calls"]] == ["peek"]
        assert effects == {"peeks": [], "sent": []}
    finally:
        made.close()


def test_a_gathered_call_changed_on_resume_is_a_divergence_and_runs_nothing(
    tmp_path: Path,
) -> None:
    """A program whose second gathered call reads the clock asks something else on resume:
    it diverged, and the changed call never reaches its tool. Both calls must have crossed
    before the pause for the second to be asked at all (how many cross first depends on
    scheduling), so the scenario is repeated until they did."""
    code = (
        "import asyncio, time\n"
        "async def main():\n"
        "    return await asyncio.gather(peek('a'), peek(str(time.time_ns())))\n"
        "await main()"
    )
    for attempt in range(10):
        effects: dict[str, list[Any]] = {"peeks": [], "sent": []}
        made = harness(tmp_path / f"tk{attempt}", effects)
        try:
            paused = run(made, code)
            assert paused.status is Status.PENDING_APPROVAL, paused
            if len(made.approvals.list()) < 2:
                continue  # only the first call crossed before the pause: nothing to change
            assert len(made.approvals.list()) == 2
            for approval in made.approvals.list():
                made.approvals.decide(approval.approval_id, "approve", by="carol")
            done = resume(made, paused.execution_meta.approval_id)
            assert done.status is Status.FAILED, done
            assert "diverged" in done.error.message
            assert set(effects["peeks"]) <= {"a"} and effects["sent"] == []
            return
        finally:
            made.close()
    raise AssertionError("in 10 runs the second gathered call never crossed before the pause")
