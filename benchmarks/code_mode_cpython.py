"""How long Code Mode's CPython tier takes to start, against bare bubblewrap and bare Python.

Alternating, round after round, each timed from the call to its end:

(t) `run_cpython` of a trivial program (``1``), to its outcome;
(f) `run_cpython` of a program whose first statement is an inner call, to the moment the host
    callback receives that call;
(w) the same with a spare `Sandbox` started beforehand (untimed), as a caller keeping one
    spare would run it;
(b) a bare ``bwrap --ro-bind / / true`` — bubblewrap alone;
(p) a bare ``python -I -S -c pass`` — the interpreter alone;
(s) the tier's own bubblewrap command line running ``python -I -S -c pass`` (no runner, no
    pipes): what the sandbox costs before toolkeeper's runner does anything;
(H) `Harness.run_code` in the CPython tier with the spare turned off (``code_spare=False``),
    from the call to the moment the tool of its first inner call runs: the road users take,
    cold, the pipeline's run_code call and the inner call's included;
(h) the same with the default spare, once it is up: the harness starts the next spare after
    each program, and the script waits (untimed) until it has started — as a model's turn
    between two programs gives it time to;
(k) the same with the default spare, back to back: a program is sent as soon as the one
    before it (untimed) answered, so it finds the spare still starting and waits for the
    rest of that start.

Goal (issue 13): the CPython tier starts in ≤ 50 ms on this machine, where bubblewrap alone
takes ~19 ms. The script prints medians and the ratios (t/b, t/p, t/s, f/s, w/f, h/H, k/H); no
thresholds are checked. Medians, because the machine is shared: one busy round must not move
the figure.

    python benchmarks/code_mode_cpython.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkeeper import tool
from toolkeeper.codemode.cpython import Sandbox, _bwrap_argv, _seccomp_filter, run_cpython
from toolkeeper.codemode.program import Abort, CodeLimits, HostCall
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import Principal

LIMITS = CodeLimits(
    wall_seconds=30,
    cpu_seconds=10,
    memory_bytes=512 * 1024 * 1024,
    output_bytes=65536,
    max_inner_calls=10,
)


async def trivial() -> float:
    async def never(_: HostCall) -> None:
        raise AssertionError("the trivial program makes no call")

    started = time.perf_counter()
    outcome = await run_cpython("1", functions=[], call=never, limits=LIMITS)
    elapsed = time.perf_counter() - started
    assert outcome.value == 1, outcome
    return elapsed


async def first_call(spare: bool = False) -> float:
    reached: list[float] = []

    async def first(_: HostCall) -> None:
        reached.append(time.perf_counter())
        raise Abort

    sandbox = await Sandbox.start() if spare else None
    started = time.perf_counter()
    with contextlib.suppress(Abort):
        await run_cpython(
            "lookup('k')", functions=["lookup"], call=first, limits=LIMITS, sandbox=sandbox
        )
    return reached[0] - started


ME = Principal("bench")


def harness(home: Path, *, spare: bool) -> tuple[Harness, list[float]]:
    """A harness whose one tool notes when it runs; CPython the tier of every program."""
    made = Harness(home=home, code_limits=LIMITS, code_tiers={"*": "cpython"}, code_spare=spare)
    reached: list[float] = []

    @tool(side_effect="none")
    def lookup(key: str) -> str:
        """Note the moment the first inner call reaches its tool."""
        reached.append(time.perf_counter())
        return key

    made.register(lookup)
    return made, reached


async def through_harness(
    made: Harness, reached: list[float], *, wait: bool = False, back_to_back: bool = False
) -> float:
    """`run_code` to the moment its first inner call's tool runs. `wait`: first let the spare
    finish starting (untimed); `back_to_back`: first run a program (untimed), and time the
    one sent as soon as it answered. Afterwards the spare's start is waited for, untimed, so
    it does not run into the next side's time."""
    spares = made.code_mode()._spares
    if back_to_back:
        await made.run_code("lookup('k')", principal=ME)
    await _spare_up(spares, wait)
    reached.clear()
    started = time.perf_counter()
    envelope = await made.run_code("lookup('k')", principal=ME)
    assert envelope.structured_content["value"] == "k", envelope
    await _spare_up(spares, spares is not None)
    return reached[0] - started


async def _spare_up(spares: Any, wait: bool) -> None:
    while wait and not spares.ready():
        await asyncio.sleep(0.005)


async def command(*argv: str, pass_fds: tuple[int, ...] = ()) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, pass_fds=pass_fds
    )
    status = await process.wait()
    elapsed = time.perf_counter() - started
    assert status == 0, argv
    return elapsed


async def sandboxed_pass() -> float:
    read, write = os.pipe()
    os.write(write, _seccomp_filter())
    os.close(write)
    argv = _bwrap_argv(filter_fd=read, request_fd=1, answer_fd=0)
    # The same sandbox, the interpreter given `pass` in place of the runner.
    argv = [*argv[: argv.index("-c") + 1], "pass"]
    try:
        return await command(*argv, pass_fds=(read,))
    finally:
        os.close(read)


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tk-cpython-bench-") as tmp:
        cold, cold_reached = harness(Path(tmp) / "cold", spare=False)
        warm, warm_reached = harness(Path(tmp) / "warm", spare=True)
        back, back_reached = harness(Path(tmp) / "back", spare=True)
        try:
            await measure(
                rounds,
                {
                    "H  harness.run_code, spare off": lambda: through_harness(cold, cold_reached),
                    "h  ... default spare, up": lambda: through_harness(
                        warm, warm_reached, wait=True
                    ),
                    "k  ... default spare, back to back": lambda: through_harness(
                        back, back_reached, back_to_back=True
                    ),
                },
            )
        finally:
            for made in (cold, warm, back):
                made.close()


async def measure(rounds: int, harness_sides: dict[str, Any]) -> None:
    python = os.path.realpath(sys.executable)
    sides = {
        "t  run_cpython trivial program": trivial,
        "f  run_cpython to first inner call": first_call,
        "w  ... with a spare sandbox started ahead": lambda: first_call(spare=True),
        "b  bare bwrap true": lambda: command("bwrap", "--ro-bind", "/", "/", "true"),
        "p  bare python -I -S -c pass": lambda: command(python, "-I", "-S", "-c", "pass"),
        "s  tier's bwrap + python -c pass": sandboxed_pass,
        **harness_sides,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for side in sides.values():  # warm the page cache once, untimed
        await side()
    for _ in range(rounds):
        for name, side in sides.items():
            times[name].append(await side())
    median = {name[0]: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"{rounds} rounds, alternating; medians (ms), p90 in brackets")
    for name, values in times.items():
        p90 = sorted(values)[int(len(values) * 0.9) - 1] * 1000
        print(f"  {name:40s} {median[name[0]]:7.1f}  [{p90:6.1f}]")
    print("ratios of medians:")
    print(f"  trivial program / bare bwrap          {median['t'] / median['b']:6.2f}x")
    print(f"  trivial program / bare python         {median['t'] / median['p']:6.2f}x")
    print(f"  trivial program / sandbox + python    {median['t'] / median['s']:6.2f}x")
    print(f"  first inner call / sandbox + python   {median['f'] / median['s']:6.2f}x")
    print(f"  first call, spare / first call, cold  {median['w'] / median['f']:6.2f}x")
    print(f"  harness, spare up / spare off         {median['h'] / median['H']:6.2f}x")
    print(f"  harness, back to back / spare off     {median['k'] / median['H']:6.2f}x")
    print(
        f"goal: CPython tier start <= 50 ms; to the first inner call through "
        f"harness.run_code: {median['H']:.1f} ms cold (spare off), {median['h']:.1f} ms with "
        f"the default spare up, {median['k']:.1f} ms back to back; run_cpython alone: "
        f"{median['f']:.1f} ms cold, {median['w']:.1f} ms with a spare; trivial program "
        f"{median['t']:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    asyncio.run(main(parser.parse_args().rounds))
