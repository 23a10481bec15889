"""The CPython tier through run_code: an approval pause aborts the sandbox, and resume
replays the recorded inner calls (no tool runs for them) before the approved one; a program
that asks something else on the way has diverged and stops before any call of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import Principal, Status, tool
from toolkeeper.errors import ConfigError
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice")


def build(home: Path, effects: dict[str, list[Any]], **options: Any) -> Harness:
    harness = Harness(home=home, **options)

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


GATED_PEEK = (
    '@approval("required")\n'
    'permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)'
    ' when { resource.id == "peek" };'
)
PEEK_TWICE = """
import asyncio

async def main():
    return await asyncio.gather(peek("a"), peek("b"), get_rows(2))

first, second, rows = await main()
[first, second, len(rows)]
"""


def gated(home: Path, effects: dict[str, list[Any]], **options: Any) -> Harness:
    """`build`'s tools and `peek`, a read an approver must allow."""
    harness = build(home, effects, policy=CedarPolicyEngine(policies=GATED_PEEK), **options)

    @tool(side_effect="none")
    def peek(key: str) -> str:
        """A read an approver must allow."""
        effects["peeks"].append(key)
        return key.upper()

    harness.register(peek)
    return harness


def test_concurrent_calls_that_need_approval_are_each_kept_and_resumed_in_turn(
    tmp_path: Path,
) -> None:
    """Two gathered reads both wait on approvals: the program pauses on the first, its
    continuation on the second (the approval it already has, not a new one); the envelope
    counts them as pending, not as reads; each read runs once."""
    effects: dict[str, list[Any]] = {"reads": [], "sent": [], "peeks": []}
    harness = gated(tmp_path / "tk", effects)
    try:
        first = run(harness, PEEK_TWICE)
        assert first.status is Status.PENDING_APPROVAL, first
        pending = {a.approval_id for a in harness.approvals.list()}
        # Both reads ask when both frames crossed before the first pause (nearly always);
        # a read whose frame came later asks when the program continues.
        assert first.execution_meta.approval_id in pending and len(pending) <= 2
        content = first.structured_content
        assert content["effects"]["pending"] == len(pending)
        assert content["effects"]["read_only"] == len(effects["reads"])
        assert content["effects"]["committed"] == content["effects"]["not_committed"] == 0
        assert first.error.effect_committed is False  # a pending call commits nothing
        asked = [first.execution_meta.approval_id]
        step = first
        while step.status is Status.PENDING_APPROVAL:
            approval_id = step.execution_meta.approval_id
            harness.approvals.decide(approval_id, "approve", by="carol")
            step = resume(harness, approval_id)
            if step.status is Status.PENDING_APPROVAL:
                assert step.execution_meta.approval_id not in asked  # none asked twice
                assert (
                    "Code Mode program"
                    in harness.approvals.get(step.execution_meta.approval_id).account
                )
                asked.append(step.execution_meta.approval_id)
        assert step.status is Status.SUCCEEDED, step
        assert len(asked) == 2 and pending <= set(asked)
        assert step.structured_content["value"] == ["A", "B", 2]
        assert sorted(effects["peeks"]) == ["a", "b"] and effects["reads"] == [2]
        assert step.structured_content["effects"]["pending"] == 0
    finally:
        harness.close()


def test_a_write_after_a_paused_call_is_not_proposed_until_that_call_is_answered(
    tmp_path: Path,
) -> None:
    """Writes run in program order: a write gathered behind a read that waits on approval is
    not proposed (no approval asked, nothing sent) until the read is answered."""
    effects: dict[str, list[Any]] = {"reads": [], "sent": [], "peeks": []}
    harness = gated(tmp_path / "tk", effects)
    code = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(peek('a'), send('x@y'))\n"
        "await main()"
    )
    try:
        paused = run(harness, code)
        assert paused.status is Status.PENDING_APPROVAL, paused
        assert [a.contract_ref.split("@")[0] for a in harness.approvals.list()] == ["peek"]
        assert [c["function"] for c in paused.structured_content["calls"]] == ["peek"]
        assert paused.error.effect_committed is False
        harness.approvals.decide(paused.execution_meta.approval_id, "approve", by="carol")
        write = resume(harness, paused.execution_meta.approval_id)
        assert write.status is Status.PENDING_APPROVAL, write  # send asks now, in its turn
        assert effects["sent"] == [] and effects["peeks"] == ["a"]
        harness.approvals.decide(write.execution_meta.approval_id, "approve", by="carol")
        done = resume(harness, write.execution_meta.approval_id)
        assert done.status is Status.SUCCEEDED, done
        assert done.structured_content["value"] == ["A", {"ok": True}]
        assert effects["sent"] == ["x@y"] and effects["peeks"] == ["a"]
        assert done.structured_content["effects"]["committed"] == 1
    finally:
        harness.close()


def test_each_program_runs_in_the_spare_sandbox_started_after_the_last(tmp_path: Path) -> None:
    """The default spare: after a CPython program a sandbox is started for the next, which
    runs in it; one found dead is not used (the program still runs); closing the harness
    kills the spare."""
    effects: dict[str, list[Any]] = {"reads": [], "sent": []}
    harness = build(tmp_path / "tk", effects)

    async def main() -> None:
        first = await harness.run_code("get_rows(1)", principal=ALICE, tier="cpython")
        assert first.status is Status.SUCCEEDED, first
        spares = harness.code_mode()._spares
        assert spares is not None
        spare = await ready(spares)
        second = await harness.run_code("len(get_rows(2))", principal=ALICE, tier="cpython")
        assert second.structured_content["value"] == 2
        assert spare.used and spare.process.returncode is not None  # ran there, now gone
        dead = await ready(spares)
        dead.kill()
        await dead.process.wait()
        replaced = await ready(spares, instead_of=dead)  # found dead while idle: replaced
        third = await harness.run_code("len(get_rows(3))", principal=ALICE, tier="cpython")
        assert third.structured_content["value"] == 3
        assert replaced.used and not dead.alive
        last = await ready(spares)
        harness.close()
        assert await asyncio.wait_for(last.process.wait(), 10) is not None

    anyio.run(main)
    assert effects["reads"] == [1, 2, 3]


def test_the_spare_starts_at_registration_when_an_operator_chose_cpython(tmp_path: Path) -> None:
    """With the CPython tier in `code_tiers`, registering Code Mode inside a running loop
    starts the spare, and the first program runs in it."""
    harness = Harness(home=tmp_path / "tk", code_tiers={"*": "cpython"})

    async def main() -> None:
        spares = harness.code_mode()._spares
        assert spares is not None
        spare = await ready(spares)
        done = await harness.run_code("1 + 1", principal=ALICE)
        assert done.structured_content["value"] == 2
        assert spare.used

    try:
        anyio.run(main)
    finally:
        harness.close()


def test_the_next_spare_starts_while_a_program_runs_in_the_last(tmp_path: Path) -> None:
    """A program that took the spare has the next one started while it runs (a program sent
    right after it finds that start under way or done); a program that started cold has
    none started beside it (the two starts would share the CPU), only after it."""
    harness = Harness(home=tmp_path / "tk")
    seen: list[tuple[bool, Any]] = []

    @tool(side_effect="none")
    async def look() -> bool:
        """Note whether a next spare is starting, and wait for it while the program waits."""
        spares = harness.code_mode()._spares
        assert spares is not None
        starting = asyncio.get_running_loop() in spares._slots
        seen.append((starting, await ready(spares) if starting else None))
        return starting

    harness.register(look)

    async def main() -> None:
        cold = await harness.run_code("look()", principal=ALICE, tier="cpython")
        assert cold.structured_content["value"] is False, cold  # no spare beside a cold start
        spares = harness.code_mode()._spares
        assert spares is not None
        spare = await ready(spares)  # started once the cold program ended
        warm = await harness.run_code("look()", principal=ALICE, tier="cpython")
        assert warm.structured_content["value"] is True, warm
        assert spare.used
        following = seen[-1][1]
        assert following is not None and following is not spare and following.alive
        third = await harness.run_code("look()", principal=ALICE, tier="cpython")
        assert third.structured_content["value"] is True
        assert following.used  # the spare started during the second program ran the third

    try:
        anyio.run(main)
    finally:
        harness.close()


def test_without_a_spare_no_sandbox_waits(tmp_path: Path) -> None:
    effects: dict[str, list[Any]] = {"reads": [], "sent": []}
    harness = build(tmp_path / "tk", effects, code_spare=False)
    try:
        done = run(harness, "len(get_rows(2))")
        assert done.structured_content["value"] == 2
        assert harness.code_mode()._spares is None
    finally:
        harness.close()


async def ready(spares: Any, instead_of: Any = None) -> Any:
    """The running loop's spare once it has started (another than `instead_of`)."""
    for _ in range(600):
        if spares.ready():
            sandbox = spares._slots[asyncio.get_running_loop()].sandbox
            if sandbox is not instead_of:
                return sandbox
        await asyncio.sleep(0.05)
    raise AssertionError("no spare started within 30 s")


def test_a_read_gathered_behind_an_approved_write_runs_after_it(tmp_path: Path) -> None:
    """Program order holds across the pause: the read after the write is not proposed while
    the write waits, and on resume it runs only once the approved write has run."""
    order: list[str] = []
    harness = Harness(home=tmp_path / "tk")

    @tool(side_effect="none")
    def look() -> int:
        """A read."""
        order.append("look")
        return len(order)

    @tool(side_effect="committing", version="1.0.0")
    def write() -> bool:
        """A write (approval by default)."""
        order.append("write")
        return True

    harness.register(look)
    harness.register(write)
    code = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(write(), look())\n"
        "await main()"
    )
    try:
        paused = run(harness, code)
        assert paused.status is Status.PENDING_APPROVAL, paused
        assert order == []  # the read waits behind the write, not proposed
        harness.approvals.decide(paused.execution_meta.approval_id, "approve", by="carol")
        done = resume(harness, paused.execution_meta.approval_id)
        assert done.status is Status.SUCCEEDED, done
        assert order == ["write", "look"] and done.structured_content["value"] == [True, 2]
    finally:
        harness.close()
