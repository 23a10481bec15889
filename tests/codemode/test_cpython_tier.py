"""The CPython tier of Code Mode (issue 13, item 3): a program runs in a sandboxed CPython, its
value is its last expression, its inner calls cross to the host callback and back, each limit
ends it with an error naming the limit, and `Replay` answers a resumed program's recorded
calls without re-running them. Every test runs the real sandbox (bubblewrap)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.codemode.cpython import (
    Divergence,
    Replay,
    Sandbox,
    SandboxUnavailable,
    run_cpython,
)
from toolkeeper.codemode.program import (
    Abort,
    CodeLimits,
    HostCall,
    InnerCallError,
    ProgramOutcome,
)
from toolkeeper.executors import sandbox as executors_sandbox

MIB = 1024 * 1024
LIMITS = CodeLimits(
    wall_seconds=30,
    cpu_seconds=10,
    memory_bytes=512 * MIB,
    output_bytes=64 * 1024,
    max_inner_calls=50,
)


async def echo(call: HostCall) -> Any:
    return {"name": call.name, "args": list(call.args), "kwargs": call.kwargs}


def run(
    code: str,
    functions: Sequence[str] = (),
    call: Callable[[HostCall], Awaitable[Any]] = echo,
    **limits: Any,
) -> ProgramOutcome:
    chosen = CodeLimits(**(LIMITS.__dict__ | limits))
    return asyncio.run(run_cpython(code, functions=functions, call=call, limits=chosen))


class Recorder:
    """A host callback that records each call and answers from a function of it."""

    def __init__(self, answer: Callable[[HostCall], Any] = lambda call: call.args[0]):
        self.calls: list[HostCall] = []
        self.answer = answer

    async def __call__(self, call: HostCall) -> Any:
        self.calls.append(call)
        return self.answer(call)


# The program's value and output


def test_the_value_is_the_last_expression_and_print_goes_to_stdout() -> None:
    outcome = run("total = sum(range(10))\nprint('summing')\n{'total': total, 'ok': True}")
    assert outcome == ProgramOutcome({"total": 45, "ok": True}, "summing\n", False, None, None)


def test_a_program_ending_in_a_statement_has_no_value() -> None:
    assert run("x = 1\nif x:\n    y = 2").value is None
    assert run("").value is None


def test_stderr_is_part_of_the_printed_output() -> None:
    outcome = run("import sys\nprint('to stderr', file=sys.stderr)\n'done'")
    assert outcome.stdout == "to stderr\n" and outcome.value == "done"


def test_the_runner_leaves_the_costly_modules_to_the_program() -> None:
    """Each module imported before the program runs is start time: the runner uses the
    built-in ``posix`` and ``_json``, not ``os``, ``json``, ``re``, ``typing`` or ``asyncio``
    (a program that uses them imports them itself, as the next test's does)."""
    loaded = set(run("import sys\nsorted(sys.modules)").value)
    assert {"posix", "_json"} <= loaded
    assert not {"os", "json", "re", "typing", "asyncio", "collections"} & loaded


def test_full_standard_library_is_available() -> None:
    code = "import json, re, statistics, collections\n"
    code += "statistics.median([3, 1, 2]), re.sub('a', 'b', 'aa'), json.dumps([1])"
    assert run(code).value == [2, "bb", "[1]"]


def test_an_uncaught_exception_is_the_outcome_with_its_line() -> None:
    outcome = run("x = 1\nraise KeyError('missing key')")
    assert outcome.error_type == "KeyError"
    assert (
        outcome.error is not None and "missing key" in outcome.error and "line 2" in outcome.error
    )
    assert outcome.value is None


def test_a_syntax_error_is_an_outcome() -> None:
    outcome = run("def (:")
    assert outcome.error_type == "SyntaxError"


def test_sys_exit_zero_ends_the_program_cleanly_and_nonzero_is_an_error() -> None:
    assert run("import sys\nprint('bye')\nsys.exit(0)").error is None
    assert run("import sys\nsys.exit(3)").error_type == "SystemExit"


def test_a_value_that_is_not_json_is_a_clear_error() -> None:
    outcome = run("object()")
    assert outcome.error_type == "TypeError"
    assert outcome.error is not None and "object is not a JSON value" in outcome.error


# Inner calls


def test_an_inner_call_reaches_the_host_and_its_value_returns() -> None:
    recorder = Recorder(lambda call: {"rows": call.kwargs["limit"] * 2})
    outcome = run("r = read_rows('sheet', limit=3)\nr['rows'] + 1", ["read_rows"], recorder)
    assert outcome.value == 7
    assert recorder.calls == [HostCall("read_rows", ("sheet",), {"limit": 3})]


def test_calls_arrive_in_program_order() -> None:
    recorder = Recorder()
    outcome = run("[get(i) for i in range(5)]", ["get"], recorder)
    assert outcome.value == [0, 1, 2, 3, 4]
    assert [call.args for call in recorder.calls] == [(0,), (1,), (2,), (3,), (4,)]


def test_an_inner_call_error_is_an_exception_the_program_can_catch() -> None:
    async def deny(call: HostCall) -> Any:
        raise InnerCallError("PolicyDenied", "writes need approval", {"tool": call.name})

    code = """
try:
    write('x')
except Exception as exc:
    caught = [type(exc).__name__, str(exc), exc.details]
caught
"""
    outcome = run(code, ["write"], deny)
    assert outcome.value == ["PolicyDenied", "writes need approval", {"tool": "write"}]


def test_the_same_error_name_is_the_same_class_in_the_program() -> None:
    async def deny(call: HostCall) -> Any:
        raise InnerCallError("NotFound", f"no {call.args[0]}")

    code = """
classes = []
for key in ('a', 'b'):
    try:
        get(key)
    except Exception as exc:
        classes.append(type(exc))
classes[0] is classes[1]
"""
    assert run(code, ["get"], deny).value is True


def test_an_uncaught_inner_call_error_is_the_outcome() -> None:
    async def deny(call: HostCall) -> Any:
        raise InnerCallError("ValidationError", "limit: must be >= 1")

    outcome = run("get(limit=0)", ["get"], deny)
    assert outcome.error_type == "ValidationError"
    assert outcome.error is not None and "limit: must be >= 1" in outcome.error


def test_an_error_name_that_is_not_an_identifier_becomes_inner_call_error() -> None:
    async def deny(call: HostCall) -> Any:
        raise InnerCallError("not an identifier!", "refused")

    assert run("get()", ["get"], deny).error_type == "InnerCallError"


def test_arguments_that_are_not_json_raise_type_error_in_the_program() -> None:
    recorder = Recorder()
    code = "try:\n    get({1, 2})\nexcept TypeError as exc:\n    message = str(exc)\nmessage"
    outcome = run(code, ["get"], recorder)
    assert "get() takes JSON values only" in outcome.value
    assert recorder.calls == []


def test_arguments_that_failed_to_encode_are_not_kept_alive() -> None:
    # Each attempt holds 40 MB; were failed attempts kept, ten would pass the memory limit.
    code = """
for attempt in range(10):
    try:
        get(['x' * (40 * 1024 * 1024), {attempt}])
    except TypeError:
        pass
get('still fine')
"""
    outcome = run(code, ["get"], Recorder(), memory_bytes=384 * MIB)
    assert outcome.error is None and outcome.value == "still fine"


def test_gathered_calls_are_in_flight_together() -> None:
    in_flight = 0
    most = 0
    all_in = asyncio.Event()

    async def slow(call: HostCall) -> Any:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if most == 3:
            all_in.set()
        await all_in.wait()  # would never return if the calls came one by one
        in_flight -= 1
        return call.args[0] * 10

    code = "import asyncio\nawait asyncio.gather(get(1), get(2), get(3))"
    outcome = run(code, ["get"], slow, wall_seconds=20)
    assert outcome.value == [10, 20, 30]
    assert most == 3


def test_calls_work_in_the_programs_own_event_loops_and_after_them() -> None:
    code = """
import asyncio
async def both(base):
    return await asyncio.gather(get(base), get(base + 1))
[asyncio.run(both(1)), get(10), asyncio.run(both(20)), get(30)]
"""
    assert run(code, ["get"], Recorder()).value == [[1, 2], 10, [20, 21], 30]


def test_an_abort_kills_the_program_and_reaches_the_caller() -> None:
    recorder = Recorder()

    async def pause_on_write(call: HostCall) -> Any:
        if call.name == "write":
            raise Abort
        return await recorder(call)

    code = "read(1)\nwrite(2)\nread(3)\nprint('after')"
    with pytest.raises(Abort):
        run(code, ["read", "write"], pause_on_write)
    assert recorder.calls == [HostCall("read", (1,), {})]


def test_a_failing_host_callback_stops_the_program_and_propagates() -> None:
    async def broken(call: HostCall) -> Any:
        raise RuntimeError("host bug")

    with pytest.raises(RuntimeError, match="host bug"):
        run("get()", ["get"], broken)


def test_a_host_value_that_is_not_json_propagates_as_a_host_error() -> None:
    async def odd(call: HostCall) -> Any:
        return object()

    with pytest.raises(TypeError, match="not JSON serializable"):
        run("get()", ["get"], odd)


def test_function_names_must_be_plain_identifiers() -> None:
    for name in ("os.system", "__import__", "__builtins__", "1abc", "class", ""):
        with pytest.raises(ValueError, match="not a plain Python identifier"):
            run("1", [name])


# Limits


def test_the_inner_call_limit_stops_the_program() -> None:
    recorder = Recorder()
    outcome = run("for i in range(100):\n    get(i)", ["get"], recorder, max_inner_calls=5)
    assert outcome.error_type == "InnerCallLimitExceeded"
    assert outcome.error is not None and "CodeLimits.max_inner_calls" in outcome.error
    assert "5" in outcome.error
    assert len(recorder.calls) == 5


def test_the_wall_time_limit_stops_a_sleeping_program() -> None:
    outcome = run("import time\nprint('started', flush=True)\ntime.sleep(60)", wall_seconds=1.5)
    assert outcome.error_type == "WallTimeLimitExceeded"
    assert outcome.error is not None and "CodeLimits.wall_seconds" in outcome.error
    assert outcome.stdout == "started\n"


def test_the_cpu_limit_stops_a_busy_program() -> None:
    outcome = run("while True:\n    pass", cpu_seconds=1, wall_seconds=30)
    assert outcome.error_type == "CpuTimeLimitExceeded"
    assert outcome.error is not None and "CodeLimits.cpu_seconds" in outcome.error


def test_the_memory_limit_stops_a_large_allocation() -> None:
    outcome = run("block = bytearray(1024 * 1024 * 1024)\nlen(block)", memory_bytes=256 * MIB)
    assert outcome.error_type == "MemoryLimitExceeded"
    assert outcome.error is not None and "CodeLimits.memory_bytes" in outcome.error


def test_output_past_the_limit_is_dropped_and_flagged() -> None:
    outcome = run("for i in range(10000):\n    print('x' * 99)\n'finished'", output_bytes=1000)
    assert outcome.truncated
    assert outcome.stdout == ("x" * 99 + "\n") * 10
    assert outcome.value == "finished"


def test_output_within_the_limit_is_not_flagged() -> None:
    outcome = run("print('x' * 99)", output_bytes=100)
    assert not outcome.truncated and outcome.stdout == "x" * 99 + "\n"


def test_output_a_cold_program_prints_at_once_is_kept_to_its_own_limit() -> None:
    """A cold program runs as soon as its sandbox is up, before the host has seen the
    hello: output printed then is kept to the program's limit, above and below the 64 KiB
    kept of a sandbox that did not start."""
    large = run("print('x' * 200_000)", output_bytes=1024 * 1024)
    assert not large.truncated and large.stdout == "x" * 200_000 + "\n"
    small = run("print('x' * 200_000)", output_bytes=100)
    assert small.truncated and small.stdout == "x" * 100


# Replay: abort-and-replay for durable pauses


def test_replay_answers_recorded_calls_then_goes_live() -> None:
    recorded = [
        (HostCall("read", ("a",), {}), "recorded-a"),
        (HostCall("write", ("b",), {"mode": "x"}), {"committed": True}),
    ]
    live = Recorder(lambda call: f"live-{call.args[0]}")
    code = "[read('a'), write('b', mode='x'), read('c')]"
    outcome = run(code, ["read", "write"], Replay(recorded).wrap(live))
    assert outcome.value == ["recorded-a", {"committed": True}, "live-c"]
    assert live.calls == [HostCall("read", ("c",), {})]


def test_replay_reraises_a_recorded_error() -> None:
    recorded = [(HostCall("write", (1,), {}), InnerCallError("ApprovalDenied", "denied by ann"))]
    live = Recorder()
    code = "try:\n    write(1)\nexcept Exception as exc:\n    seen = type(exc).__name__\nseen"
    outcome = run(code, ["write"], Replay(recorded).wrap(live))
    assert outcome.value == "ApprovalDenied"
    assert live.calls == []


def test_replay_detects_a_program_that_diverged() -> None:
    recorded = [(HostCall("read", ("a",), {}), 1), (HostCall("write", ("b",), {}), 2)]
    live = Recorder()
    with pytest.raises(Divergence) as caught:
        run("read('a')\nwrite('other')", ["read", "write"], Replay(recorded).wrap(live))
    assert caught.value.position == 1
    assert caught.value.recorded == HostCall("write", ("b",), {})
    assert caught.value.made == HostCall("write", ("other",), {})
    assert 'write("b")' in str(caught.value) and 'write("other")' in str(caught.value)
    assert live.calls == []


def test_replay_detects_a_program_that_ended_before_its_recorded_calls() -> None:
    recorded = [(HostCall("read", ("a",), {}), 1), (HostCall("write", ("b",), {}), 2)]
    replaying = Replay(recorded).wrap(Recorder())
    outcome = run("read('a')\n'done early'", ["read", "write"], replaying)
    assert outcome.value == "done early"
    with pytest.raises(Divergence, match="ended before it") as caught:
        replaying.finish()
    assert caught.value.position == 1 and caught.value.made is None


def test_replay_finishes_cleanly_when_every_recorded_call_was_made() -> None:
    recorded = [(HostCall("read", ("a",), {}), 1)]
    replaying = Replay(recorded).wrap(Recorder(lambda call: 10))
    assert run("read('a') + read('b')", ["read"], replaying).value == 11
    replaying.finish()
    assert replaying.position == 2


def test_replay_compares_by_value_so_a_tuple_matches_the_list_the_program_sends() -> None:
    recorded = [(HostCall("put", ((1, 2),), {"tags": ("a",)}), "ok")]
    outcome = run("put([1, 2], tags=['a'])", ["put"], Replay(recorded).wrap(Recorder()))
    assert outcome.value == "ok"


def test_replay_answers_gathered_calls_in_the_order_they_were_made() -> None:
    recorded = [(HostCall("read", (n,), {}), f"recorded-{n}") for n in range(3)]
    live = Recorder(lambda call: f"live-{call.args[0]}")
    code = "import asyncio\nawait asyncio.gather(*(read(n) for n in range(4)))"
    outcome = run(code, ["read"], Replay(recorded).wrap(live))
    assert outcome.value == ["recorded-0", "recorded-1", "recorded-2", "live-3"]
    assert live.calls == [HostCall("read", (3,), {})]


# A sandbox started ahead


def test_a_sandbox_started_ahead_runs_one_program() -> None:
    async def scenario() -> None:
        sandbox = await Sandbox.start()
        assert sandbox.alive
        outcome = await run_cpython(
            "print('hi')\nget(2)",
            functions=["get"],
            call=Recorder(),
            limits=LIMITS,
            sandbox=sandbox,
        )
        assert (outcome.value, outcome.stdout) == (2, "hi\n")
        assert not sandbox.alive and sandbox.process.returncode is not None
        with pytest.raises(ValueError, match="already ran a program"):
            await run_cpython("1", functions=[], call=echo, limits=LIMITS, sandbox=sandbox)

    asyncio.run(scenario())


def test_a_dead_spare_is_replaced_by_a_fresh_sandbox() -> None:
    async def scenario() -> None:
        sandbox = await Sandbox.start()
        sandbox.kill()
        await sandbox.process.wait()
        outcome = await run_cpython(
            "6 * 7", functions=[], call=echo, limits=LIMITS, sandbox=sandbox
        )
        assert outcome.value == 42

    asyncio.run(scenario())


def test_frames_queued_behind_the_runner_reach_it_without_an_answer_to_its_hello() -> None:
    """How a cold run starts: its start frame goes down the pipe with the runner, and the
    runner goes on to the program without the host writing anything after its hello."""
    start = {
        "op": "start",
        "code": "6 * 7",
        "functions": [],
        "max_frame": 1 << 20,
        "limits": {"RLIMIT_CPU": 10, "RLIMIT_AS": 512 * MIB},
    }
    body = json.dumps(start).encode()

    async def scenario() -> None:
        sandbox = await Sandbox.start(first=len(body).to_bytes(4, "big") + body)
        try:
            header = await asyncio.wait_for(sandbox.frames.readexactly(4), 30)
            report = await sandbox.frames.readexactly(int.from_bytes(header, "big"))
            assert json.loads(report) == {"op": "result", "value": 42}
        finally:
            await sandbox.close()

    asyncio.run(scenario())


def test_a_cold_program_larger_than_the_pipe_reaches_the_runner_whole() -> None:
    """A cold start puts the runner and the program into the pipe before bubblewrap starts,
    as far as the pipe holds them; a program past that follows once the runner reads."""
    text = "x" * (300 * 1024)
    outcome = run(f"s = {text!r}\nlen(s), s[-3:]")
    assert outcome.value == [300 * 1024, "xxx"]


def test_an_unused_sandbox_is_closed_and_killed() -> None:
    async def scenario() -> None:
        sandbox = await Sandbox.start()
        await sandbox.close()
        assert sandbox.process.returncode is not None and not sandbox.alive

    asyncio.run(scenario())


# Failing closed without a sandbox


def test_missing_bubblewrap_fails_closed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    recorder = Recorder()
    with pytest.raises(SandboxUnavailable, match="needs bubblewrap"):
        run("get(1)", ["get"], recorder)
    assert recorder.calls == []


def test_a_bubblewrap_that_cannot_create_namespaces_fails_closed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What bwrap prints where user namespaces are denied, from an executable of that name.
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SandboxUnavailable) as caught:
        run("1")
    assert "No permissions to creating new namespace" in caught.value.detail
    assert "could not start" in str(caught.value)


def test_the_tiers_failure_is_the_sandboxs_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A handler for any sandbox that did not start (the shell's) catches this tier's too.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(executors_sandbox.SandboxUnavailable) as caught:
        run("1")
    assert "needs bubblewrap" in caught.value.reason
