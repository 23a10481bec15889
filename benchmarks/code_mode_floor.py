"""Where a Monty inner call's cost goes: CPU per call of the same read-only call through
`Harness.invoke` (the baseline), from a program driven as Code Mode drives it (a stepper
thread per program, `monty._Stepper`), and from a program whose sandbox steps run on the
event loop's own thread — which Code Mode does not do (a program would hold the loop for as
long as it computes), measured here only as the floor any hand-over is measured against.
Also: the sandbox round trip alone, and the direct call's own CPU right after a sandbox
round trip (the pipeline runs on caches the other process and threads have used).

CPU is this process's threads plus its child processes (the Monty worker), per call, the
sides alternating in rounds; ratios are medians of per-round ratios.

    python benchmarks/code_mode_floor.py [--calls 400] [--rounds 12] [--cpu N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pydantic_monty as pm
from code_mode import children_cpu, lookup_harness  # the sibling benchmark, on sys.path

from toolkeeper import Principal, Proposal
from toolkeeper.codemode import monty

ME = Principal("bench")


class InPlace:
    """A stepper that runs each step on the calling thread: the floor, not a driver."""

    @classmethod
    def take(cls) -> InPlace:
        return cls()

    def put_back(self) -> None:
        return None

    async def step(self, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return step(*args, **kwargs)


def cpu(*, end: bool = False) -> float:
    """Seconds on CPU of this process's threads and of its live child processes, read so
    that the reading of /proc counts in no interval: this process's own time read after it
    at an interval's start (the default), before it at its end (`end`)."""
    if end:
        own = time.process_time()
        return own + children_cpu()
    children = children_cpu()
    return time.process_time() + children


async def measure(home: Path, calls: int, rounds: int) -> None:
    harness = lookup_harness(home)
    program = f"for i in range({calls}):\n    lookup('k')\n"
    stepper = monty._Stepper

    async def flushed() -> None:
        await anyio.to_thread.run_sync(harness.ledger.flush)

    async def direct(r: int) -> float:
        start = cpu()
        for n in range(calls):
            await harness.invoke(Proposal(f"d{r}.{n}", "lookup", {"key": "k"}), principal=ME)
        await flushed()
        return (cpu(end=True) - start) / calls

    def program_with(driver: Any) -> Callable[[int], Any]:
        async def run(r: int) -> float:
            monty._Stepper = driver  # type: ignore[misc]  # the driver this side measures
            try:
                start = cpu()
                await harness.run_code(program, principal=ME)
                await flushed()
                return (cpu(end=True) - start) / calls
            finally:
                monty._Stepper = stepper  # type: ignore[misc]

        return run

    sides: dict[str, Callable[[int], Any]] = {
        "harness.invoke": direct,
        "program, stepper thread (Code Mode)": program_with(stepper),
        "program, steps on the loop (floor)": program_with(InPlace),
    }
    for name in sides:  # warm: pool, views, validators, Cedar
        await sides[name](-1)
    figures: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            figures[name].append(await sides[name](r))
    base = figures["harness.invoke"]
    print(f"inner-call CPU ({calls} calls a round, {rounds} rounds, alternating)")
    for name, values in figures.items():
        ratio = statistics.median(x / y for x, y in zip(values, base, strict=True))
        print(f"   {name:38s} {statistics.median(values) * 1e6:7.1f} µs/call   {ratio:.2f}x")

    # The sandbox round trip alone, and a direct call right after one.
    pool = pm.Monty(min_processes=1)
    with pool:
        trip: list[float] = []
        after: list[float] = []
        alone: list[float] = []
        limits: pm.ResourceLimits = {"max_suspensions": 10 * calls}
        for r in range(rounds):
            with pool.checkout(limits=limits) as session:
                snapshot = session.feed_start(f"for i in range({2 * calls + 2}):\n    f('k')\n")
                start = cpu()
                for _ in range(calls):
                    snapshot = snapshot.resume({"return_value": {"key": "k", "value": 1}})
                trip.append((cpu(end=True) - start) / calls)
                spent = [0, 0]
                for n in range(calls):
                    snapshot = snapshot.resume({"return_value": {"key": "k", "value": 1}})
                    begin = time.thread_time_ns()
                    await harness.invoke(
                        Proposal(f"a{r}.{n}", "lookup", {"key": "k"}), principal=ME
                    )
                    spent[0] += time.thread_time_ns() - begin
                    begin = time.thread_time_ns()
                    await harness.invoke(
                        Proposal(f"b{r}.{n}", "lookup", {"key": "k"}), principal=ME
                    )
                    spent[1] += time.thread_time_ns() - begin
                after.append(spent[0] / calls / 1e9)
                alone.append(spent[1] / calls / 1e9)
            await flushed()
    print(
        "   a sandbox round trip alone (this process and the worker, on the loop's thread) "
        f"{statistics.median(trip) * 1e6:.1f} µs"
    )
    print(
        "   harness.invoke on the loop's thread: right after a sandbox round trip "
        f"{statistics.median(after) * 1e6:.1f} µs, right after another invoke "
        f"{statistics.median(alone) * 1e6:.1f} µs"
    )
    harness.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument(
        "--cpu",
        type=int,
        help="run this process, its threads and the Monty worker it starts on this one CPU: "
        "every hand-over then switches on one CPU instead of waking another",
    )
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # before the pool starts: the worker inherits it
        print(f"pinned to CPU {args.cpu}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="tk-code-floor-") as tmp:
        anyio.run(measure, Path(tmp), args.calls, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
