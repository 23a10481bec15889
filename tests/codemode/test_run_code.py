"""`run_code` end to end: a real Monty sandbox, the real pipeline, SQLite ledger and Cedar."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import Principal, Status, tool
from toolkeeper.cli import main
from toolkeeper.codemode import CodeLimits
from toolkeeper.codemode.run_code import RUN_CODE_REF
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import EffectState, ErrorCategory, ResultEnvelope
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.pipeline import STAGE_NAMES

ALICE = Principal("alice")

NO_CODE_WRITES = """
@id("test.no_code_writes")
forbid (principal, action, resource)
when { context.environment has origin && context.environment.origin == "code"
       && resource.side_effect != "none" };
"""


def make_harness(home: Path, sent: list[dict[str, Any]], **options: Any) -> Harness:
    harness = Harness(home=home, **options)

    @tool(side_effect="none")
    def get_rows(sheet_id: str, limit: int = 10) -> list[dict[str, Any]]:
        """Rows of a spreadsheet."""
        return [
            {"id": i, "email": f"u{i}@example.com", "status": "active" if i % 3 else "inactive"}
            for i in range(limit)
        ]

    @tool(side_effect="committing", version="1.0.0")
    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send one email."""
        sent.append({"to": to, "body": body})
        return {"sent": True}

    @tool(side_effect="none", required_capabilities=["admin"])
    def get_secret_rows() -> list[int]:
        """Hidden from non-admins."""
        return [1]

    harness.register(get_rows)
    harness.register(send_email)
    harness.register(get_secret_rows)
    return harness


def run(harness: Harness, code: str, principal: Principal = ALICE) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await harness.run_code(code, principal=principal)

    return anyio.run(main)


def resume(harness: Harness, approval_id: str) -> ResultEnvelope:
    async def main() -> ResultEnvelope:
        return await harness.resume(approval_id, principal=ALICE)

    return anyio.run(main)


@pytest.fixture
def sent() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def harness(tmp_path: Path, sent: list[dict[str, Any]]) -> Any:
    harness = make_harness(tmp_path / "tk", sent)
    yield harness
    harness.close()


def test_only_printed_output_and_value_come_back_and_inner_calls_are_governed(
    harness: Harness,
) -> None:
    envelope = run(
        harness,
        "rows = get_rows('abc', limit=10000)\n"
        "active = [r for r in rows if r['status'] == 'active']\n"
        "print(len(rows), len(active))\n"
        "{'active': len(active), 'first': active[0]['id']}",
    )
    assert envelope.status is Status.SUCCEEDED, envelope
    content = envelope.structured_content
    assert content["value"] == {"active": 6666, "first": 1}
    assert content["stdout"] == "10000 6666\n"
    assert content["calls_total"] == 1
    [inner] = content["calls"]
    assert inner["tool"] == "get_rows@0.0.0" and inner["status"] == "succeeded"
    run_request = envelope.execution_meta.request_id
    record = harness.ledger.get(inner["request_id"])
    assert record.parent_request_id == run_request
    assert record.call_id == f"{envelope.execution_meta.call_id}.1"
    # The inner call went through all ten stages, like any direct call.
    stages = [event.stage for event in harness.ledger.events(inner["request_id"])]
    assert list(dict.fromkeys(stages)) == list(STAGE_NAMES)
    assert harness.ledger.get(run_request).contract_ref == RUN_CODE_REF


def test_invalid_arguments_raise_value_error_with_the_field_errors_and_fix(
    harness: Harness,
) -> None:
    envelope = run(
        harness,
        "try:\n    get_rows(5)\nexcept ValueError as e:\n    print(str(e))\n",
    )
    printed = envelope.structured_content["stdout"]
    assert "/sheet_id: expected string, got integer 5" in printed
    assert 'fix: /sheet_id: send "5" as a string, in quotes' in printed
    assert envelope.structured_content["calls"][0]["error"] == "invalid_argument"


def test_unknown_function_suggests_visible_names_only(harness: Harness) -> None:
    envelope = run(harness, "get_rowz('a')")
    assert envelope.status is Status.FAILED
    assert "name 'get_rowz' is not defined; did you mean get_rows?" in envelope.error.message
    assert envelope.error.effect_committed is False
    hidden = run(harness, "get_secret_rowz()")
    assert "get_secret_rows" not in hidden.error.message  # never leaks a hidden tool
    called_hidden = run(harness, "get_secret_rows()")
    assert "not defined" in called_hidden.error.message


def test_policy_sees_code_origin_and_a_denial_is_a_catchable_exception(
    tmp_path: Path, sent: list[dict[str, Any]]
) -> None:
    harness = make_harness(tmp_path / "tk", sent, policy=CedarPolicyEngine(policies=NO_CODE_WRITES))
    envelope = run(
        harness,
        "try:\n    send_email('a@b', 'hi')\nexcept PermissionError as e:\n    print('denied')\n"
        "len(get_rows('s'))",
    )
    assert envelope.status is Status.SUCCEEDED, envelope
    assert envelope.structured_content["stdout"] == "denied\n"
    assert envelope.structured_content["value"] == 10
    assert sent == []
    denied = envelope.structured_content["calls"][0]
    assert denied["status"] == "rejected" and denied["error"] == "policy_denied"
    harness.close()


def test_an_uncaught_inner_failure_fails_run_code_with_its_category(harness: Harness) -> None:
    envelope = run(harness, "get_rows(5)")
    assert envelope.status is Status.FAILED
    assert envelope.error.category is ErrorCategory.INVALID_ARGUMENT
    assert envelope.error.message.startswith("the program raised ValueError")
    assert envelope.structured_content["calls"][0]["status"] == "rejected"


def test_approval_pauses_the_program_and_resume_continues_it_exactly_there(
    tmp_path: Path, sent: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "tk"
    harness = make_harness(home, sent)
    code = (
        "rows = get_rows('abc', limit=4)\n"
        "print('read', len(rows))\n"
        "send_email(rows[1]['email'], 'hello')\n"
        "print('sent')\n"
        "rows[1]['email']"
    )
    envelope = run(harness, code)
    assert envelope.status is Status.PENDING_APPROVAL, envelope
    approval_id = envelope.execution_meta.approval_id
    paused = envelope.structured_content["paused_at"]
    assert paused["tool"] == "send_email@1.0.0" and paused["approval_id"] == approval_id
    assert envelope.structured_content["stdout"] == "read 4\n"
    approval = harness.approvals.get(approval_id)
    assert "Code Mode program, call #2" in approval.account
    assert "send_email@1.0.0" in approval.account and "u1@example.com" in approval.account
    assert "1 read-only call(s) succeeded" in approval.account
    assert harness.ledger.get(envelope.execution_meta.request_id).status == "pending_approval"
    harness.approvals.decide(approval_id, "approve", by="carol")
    harness.close()

    # A fresh harness (and sandbox pool) continues it: nothing before the pause runs again.
    again = make_harness(home, sent)
    resumed = resume(again, approval_id)
    assert resumed.status is Status.SUCCEEDED, resumed
    assert resumed.structured_content["value"] == "u1@example.com"
    assert resumed.structured_content["stdout"] == "read 4\nsent\n"
    assert sent == [{"to": "u1@example.com", "body": "hello"}]
    assert [c["status"] for c in resumed.structured_content["calls"]] == [
        "succeeded",
        "succeeded",
    ]
    assert resumed.structured_content["effects"]["committed"] == 1
    assert resumed.execution_meta.effect_state is EffectState.COMMITTED
    first_read = envelope.structured_content["calls"][0]["request_id"]
    assert resumed.structured_content["calls"][0]["request_id"] == first_read  # not re-run
    children = [r for r in again.ledger.query(limit=50) if r.tool == "get_rows@0.0.0"]
    assert len(children) == 1
    # The ledger shows the tree: the paused run, its inner calls, the continuation.
    assert main(["ledger", "show", envelope.execution_meta.request_id, "--home", str(home)]) == 0
    shown = capsys.readouterr().out
    tree = shown[shown.index("calls made under it:") :].splitlines()[1:]
    assert [line.split()[3] for line in tree] == [
        "get_rows@0.0.0",
        "send_email@1.0.0",
        RUN_CODE_REF,
    ]
    assert "succeeded" in tree[1] and "committed" in tree[1]
    # Another resume answers with the same outcome and runs nothing.
    twice = resume(again, approval_id)
    assert twice.status is Status.SUCCEEDED
    assert twice.execution_meta.request_id == resumed.execution_meta.request_id
    assert len(sent) == 1
    again.close()


def test_a_denied_inner_call_raises_permission_error_in_the_resumed_program(
    harness: Harness, sent: list[dict[str, Any]]
) -> None:
    envelope = run(
        harness,
        "try:\n    send_email('a@b', 'x')\n"
        "except PermissionError as e:\n    print('no:', e)\n'done'",
    )
    approval_id = envelope.execution_meta.approval_id
    harness.approvals.decide(approval_id, "deny", by="carol", reason="not today")
    resumed = resume(harness, approval_id)
    assert resumed.status is Status.SUCCEEDED
    assert resumed.structured_content["value"] == "done"
    assert "carol denied this call: not today" in resumed.structured_content["stdout"]
    assert sent == []


def test_a_second_pause_in_a_resumed_program_pauses_again(
    harness: Harness, sent: list[dict[str, Any]]
) -> None:
    envelope = run(harness, "send_email('a@b', '1')\nsend_email('c@d', '2')\n'ok'")
    first = envelope.execution_meta.approval_id
    harness.approvals.decide(first, "approve", by="carol")
    middle = resume(harness, first)
    assert middle.status is Status.PENDING_APPROVAL
    second = middle.execution_meta.approval_id
    assert second != first and len(sent) == 1
    harness.approvals.decide(second, "approve", by="carol")
    done = resume(harness, second)
    assert done.status is Status.SUCCEEDED and done.structured_content["value"] == "ok"
    assert [s["body"] for s in sent] == ["1", "2"]
    assert done.structured_content["calls_total"] == 2


def test_limits_end_the_program_naming_the_limit_and_the_setting(
    tmp_path: Path, sent: list[dict[str, Any]]
) -> None:
    limits = CodeLimits(
        wall_seconds=5,
        cpu_seconds=1,
        memory_bytes=8 * 1024 * 1024,
        output_bytes=64,
        max_inner_calls=3,
    )
    harness = make_harness(tmp_path / "tk", sent, code_limits=limits)
    calls = run(harness, "for i in range(10):\n    get_rows('s')")
    assert "CodeLimits.max_inner_calls" in calls.error.message
    assert calls.structured_content["calls_total"] == 3
    cpu = run(harness, "while True:\n    pass")
    assert cpu.error.category is ErrorCategory.TIMEOUT
    assert "CodeLimits.cpu_seconds" in cpu.error.message
    memory = run(harness, "x = []\nwhile True:\n    x.append('y' * 100000)")
    assert "CodeLimits.memory_bytes" in memory.error.message
    deep = run(harness, "def f(n):\n    return f(n + 1)\nf(0)")
    assert "RecursionError" in deep.error.message
    printed = run(harness, "for i in range(100):\n    print('line', i)\n1")
    content = printed.structured_content
    assert len(content["stdout"].encode()) <= 64
    full = harness.artifacts.get_json(content["stdout_artifact"])
    assert full["stdout"].count("line") == 100
    harness.close()


GATHER = """
import asyncio

async def main():
    counts = await asyncio.gather(*[count_slow_async(f"s{i}") for i in range(4)])
    await send_email_async("a@b", "after the reads")
    return sum(counts)

total = await main()
total
"""


def test_gathered_reads_run_concurrently_and_a_write_in_the_batch_pauses_durably(
    tmp_path: Path, sent: list[dict[str, Any]]
) -> None:
    harness = make_harness(tmp_path / "tk", sent)
    running = {"now": 0, "most": 0}

    @tool(side_effect="none")
    async def count_slow(sheet_id: str) -> int:
        """Count rows, slowly."""
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await anyio.sleep(0.05)
        running["now"] -= 1
        return 10

    harness.register(count_slow)
    envelope = run(harness, GATHER)
    assert running["most"] == 4  # the four reads overlapped
    assert envelope.status is Status.PENDING_APPROVAL, envelope
    approval_id = envelope.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="carol")
    resumed = resume(harness, approval_id)
    assert resumed.status is Status.SUCCEEDED, resumed
    assert resumed.structured_content["value"] == 40
    assert sent == [{"to": "a@b", "body": "after the reads"}]
    assert [c["seq"] for c in resumed.structured_content["calls"]] == [1, 2, 3, 4, 5]
    harness.close()


def test_a_vendor_view_offers_one_run_code_tool_carrying_the_sdk(harness: Harness) -> None:
    from toolkeeper import adapters

    contract = harness.code_mode().view_contract(ALICE)
    [definition] = adapters.render([contract], vendor="openai_chat")
    function = definition["function"]
    assert function["name"] == "toolkeeper_run_code"
    assert "def get_rows(sheet_id: str, limit: int = 10)" in function["description"]
    assert "get_secret_rows" not in function["description"]
    assert list(function["parameters"]["properties"]) == ["code"]
    # A large catalog gets an index of signatures instead, and sdk_help for the rest.
    small = harness.code_mode().view_contract(ALICE, inline_bytes=100)
    [indexed] = adapters.render([small], vendor="anthropic")
    assert "get_rows(sheet_id, limit=...)  # Rows of a spreadsheet" in indexed["description"]
    assert "send_email(to, body) [writes]" in indexed["description"]

    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "toolkeeper_run_code",
                                "arguments": '{"code": "print(sdk_help(\\"get_rows\\"))\\n'
                                'len(get_rows(\\"s\\", 3))"}',
                            },
                        }
                    ],
                }
            }
        ]
    }

    async def turn() -> list[dict[str, Any]]:
        return await harness.run_tool_calls(response, vendor="openai_chat", principal=ALICE)

    [message] = anyio.run(turn)
    assert message["tool_call_id"] == "call_1"
    assert '\\"value\\": 3' in message["content"] or '"value": 3' in message["content"]
    assert "def get_rows(" in message["content"]  # what sdk_help printed


def test_the_event_loop_stays_responsive_while_a_program_computes(tmp_path: Path) -> None:
    """A program computing between two inner calls must not hold the event loop: a task
    ticking alongside keeps ticking, its longest gap far below the computation's length."""
    harness = Harness(home=tmp_path / "tk")
    marks: list[float] = []

    @tool(side_effect="none")
    def mark() -> int:
        """Note the time."""
        marks.append(time.monotonic())
        return len(marks)

    harness.register(mark)
    program = "mark()\ntotal = sum(i * i % 7 for i in range(3_000_000))\nmark()\ntotal"
    ticks: list[float] = []

    async def main() -> ResultEnvelope:
        done = anyio.Event()

        async def tick() -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                await anyio.sleep(0.001)

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            envelope = await harness.run_code(program, principal=ALICE)
            done.set()
        return envelope

    try:
        envelope = anyio.run(main)
    finally:
        harness.close()
    assert envelope.status == Status.SUCCEEDED, envelope.error
    computing = marks[1] - marks[0]
    during = [t for t in ticks if marks[0] <= t <= marks[1]]
    gaps = [b - a for a, b in itertools.pairwise(during)]
    assert len(during) > 2 and max(gaps) < computing / 2, (computing, len(during), max(gaps))


def test_run_code_records_the_effect_its_inner_calls_had(tmp_path: Path) -> None:
    """run_code's contract declares the worst case; its recorded effect is what the program's
    calls did: reads only → not committed, an inner write of unknown effect → unknown."""
    permit = (
        'permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)'
        ' when { resource.id == "flaky_write" };'
    )
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine(policies=permit))

    @tool(side_effect="none")
    def count() -> int:
        """A number."""
        return 3

    @tool(side_effect="reversible", version="1.0.0")
    def flaky_write(n: int) -> int:
        """A write that crashes mid-way."""
        raise RuntimeError("connection reset after sending")

    harness.register(count)
    harness.register(flaky_write)
    try:
        read = run(harness, "count() + 1")
        assert read.status is Status.SUCCEEDED and read.structured_content["value"] == 4
        assert read.execution_meta.effect_state is EffectState.NOT_COMMITTED
        row = harness.ledger.get(read.execution_meta.request_id)
        assert row.effect_state == "not_committed"
        caught = run(harness, "try:\n    flaky_write(1)\nexcept RuntimeError:\n    pass\n'ok'")
        assert caught.status is Status.SUCCEEDED, caught
        assert caught.structured_content["effects"]["unknown"] == 1
        assert caught.execution_meta.effect_state is EffectState.UNKNOWN
    finally:
        harness.close()


PEEK_TWICE = """
import asyncio

async def main():
    return await asyncio.gather(peek_async("a"), peek_async("b"), get_rows_async("s", limit=2))

first, second, rows = await main()
[first, second, len(rows)]
"""


def test_several_approvals_in_one_gathered_batch_are_resolved_in_turn(
    tmp_path: Path, sent: list[dict[str, Any]]
) -> None:
    """Two concurrent reads that both need approval: run_code pauses on the first, its
    continuation pauses on the second (its approval now carries the program), and only then
    does the program go on — no approval is left without the program waiting on it."""
    gated = (
        '@approval("required")\n'
        'permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)'
        ' when { resource.id == "peek" };'
    )
    harness = make_harness(tmp_path / "tk", sent, policy=CedarPolicyEngine(policies=gated))

    @tool(side_effect="none")
    def peek(key: str) -> str:
        """A read an approver must allow."""
        return key.upper()

    harness.register(peek)
    try:
        first = run(harness, PEEK_TWICE)
        assert first.status is Status.PENDING_APPROVAL, first
        pending = harness.approvals.list()
        assert len(pending) == 2  # both reads asked, concurrently
        waiting = {a.approval_id: a for a in pending}
        assert first.execution_meta.approval_id in waiting
        harness.approvals.decide(first.execution_meta.approval_id, "approve", by="carol")

        second = resume(harness, first.execution_meta.approval_id)
        assert second.status is Status.PENDING_APPROVAL, second
        other = second.execution_meta.approval_id
        assert other in waiting and other != first.execution_meta.approval_id
        assert "Code Mode program" in harness.approvals.get(other).account  # it has the program
        assert [a.approval_id for a in harness.approvals.list()] == [other]
        harness.approvals.decide(other, "approve", by="carol")

        done = resume(harness, other)
        assert done.status is Status.SUCCEEDED, done
        assert sorted(done.structured_content["value"][:2]) == ["A", "B"]
        assert done.structured_content["value"][2] == 2
        assert harness.approvals.list() == []  # none orphaned
        peeks = [r for r in harness.ledger.query(limit=50) if r.tool == "peek@0.0.0"]
        assert sorted(r.status for r in peeks) == ["succeeded", "succeeded"]
    finally:
        harness.close()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the Monty pool has a worker per CPU")
def test_two_programs_run_at_once_each_driven_apart(tmp_path: Path) -> None:
    """Programs of one harness run side by side: each one's calls wait for the other's, so
    they finish only if neither program's sandbox steps hold the other's up."""
    harness = Harness(home=tmp_path / "tk")
    arrived = {(me, n): anyio.Event() for me in "ab" for n in (1, 2)}

    @tool(side_effect="none")
    async def meet(me: str, other: str, n: int) -> str:
        """Arrive, then wait for the other program to arrive as often."""
        arrived[me, n].set()
        await arrived[other, n].wait()
        return me * n

    harness.register(meet)
    envelopes: dict[str, ResultEnvelope] = {}

    async def program(me: str, other: str) -> None:
        code = f"meet('{me}', '{other}', 1) + meet('{me}', '{other}', 2)"
        envelopes[me] = await harness.run_code(code, principal=ALICE)

    async def main() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(program, "a", "b")
                group.start_soon(program, "b", "a")

    try:
        anyio.run(main)
    finally:
        harness.close()
    assert envelopes["a"].structured_content["value"] == "aaa"
    assert envelopes["b"].structured_content["value"] == "bbb"
