"""Code Mode, measured in one run against baselines measured in the same run:

1. Tokens (cl100k_base) of seed 003's task — 10,000 spreadsheet rows, keep the active ones,
   report counts and five examples — natively (the tool definitions, the call and the whole
   result in the model's context) vs in Code Mode (run_code with its SDK, the program, its
   answer). Goal ≥ 75× fewer.
2. SDK text vs JSON schemas for a large catalog: every distinct function of the vendored
   BFCL samples (tests/data/bfcl), as OpenAI Chat tool definitions, as the full SDK text and
   as the index a vendor view uses for large catalogs.
3. Inner-call overhead: a read-only call made from a program vs the same call through
   `Harness.invoke`, rounds alternating sides, each round ending when the ledger has
   committed its rows; per inner call = (program of N calls − program of 1 call) / (N − 1).
   Goal ≤ 1.2×.
4. Monty start to first inner call: from `MontyTier.run` to the host callback's first call,
   warm pool. Goal ≤ 1 ms.

    python benchmarks/code_mode.py [--calls 400] [--rounds 11]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Principal, Proposal, ToolContract, adapters, tool
from toolkeeper.codemode import CodeLimits, HostCall
from toolkeeper.codemode.monty import MontyTier
from toolkeeper.codemode.sdk import index, render
from toolkeeper.importers.formats import from_bfcl_function
from toolkeeper.lint.surface import count_tokens
from toolkeeper.runtime.harness import Harness

ROOT = Path(__file__).resolve().parent.parent
ME = Principal("bench")


def scenario() -> Any:
    path = ROOT / "examples" / "scenarios" / "code_mode.py"
    spec = importlib.util.spec_from_file_location("code_mode_scenario", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokens(home: Path) -> None:
    demo = scenario()
    harness, _ = demo.build(home)

    async def summarize() -> Any:
        return await harness.run_code(demo.SUMMARY_PROGRAM, principal=demo.ANALYST)

    envelope = anyio.run(summarize)
    native, how = count_tokens(demo.native_context(harness))
    coded, _ = count_tokens(demo.code_mode_context(harness, envelope))
    calls = harness.ledger.children(envelope.execution_meta.request_id)
    print(f"1. tokens ({how}), seed 003's 10,000-row spreadsheet")
    print(f"   native {native:,}   Code Mode {coded:,}   ratio {native / coded:.0f}x (goal ≥ 75x)")
    print(f"   inner calls governed and recorded: {len(calls)} ({calls[0].status})")
    harness.close()


def bfcl_catalog() -> list[ToolContract]:
    contracts: dict[str, ToolContract] = {}
    for name in ("simple_python", "multiple", "parallel", "live_simple"):
        for line in (ROOT / "tests" / "data" / "bfcl" / f"BFCL_v4_{name}.json").open():
            for doc in json.loads(line)["function"]:
                contract = from_bfcl_function(doc)
                contracts.setdefault(contract.id, contract)
    return list(contracts.values())


def sdk_tokens() -> None:
    contracts = bfcl_catalog()
    schemas, how = count_tokens(json.dumps(adapters.render(contracts, vendor="openai_chat")))
    sdk, _ = count_tokens(render(contracts))
    short, _ = count_tokens(index(contracts))
    print(f"2. a large catalog: {len(contracts)} BFCL functions ({how})")
    print(f"   JSON schemas (openai_chat) {schemas:,}   SDK text {sdk:,} ({sdk / schemas:.2f}x)")
    print(f"   SDK index {short:,} ({short / schemas:.2f}x)")


def lookup_harness(home: Path) -> Harness:
    """A harness with one read-only tool, `lookup`: the call both sides of an overhead
    measurement make (also benchmarks/code_mode_floor.py's)."""
    harness = Harness(home=home)

    @tool(side_effect="none")
    async def lookup(key: str) -> dict[str, Any]:
        """Read one value."""
        return {"key": key, "value": len(key)}

    harness.register(lookup)
    return harness


async def overhead(home: Path, calls: int, rounds: int) -> None:
    harness = lookup_harness(home)
    program = f"for i in range({calls}):\n    lookup('k')\n"
    single = "lookup('k')\n"

    async def flushed() -> None:
        # Each side pays for its own ledger rows: reads are written behind, so without this a
        # round's rows would be committed during whichever round comes next.
        await anyio.to_thread.run_sync(harness.ledger.flush)

    async def invoked() -> tuple[float, float]:
        start = clocks()
        for n in range(calls):
            await harness.invoke(Proposal(f"c{n}", "lookup", {"key": "k"}), principal=ME)
        await flushed()
        return since(start, calls)

    async def inner() -> tuple[float, float]:
        start = clocks()
        await harness.run_code(program, principal=ME)
        await flushed()
        many = since(start, 1)
        start = clocks()
        await harness.run_code(single, principal=ME)
        await flushed()
        one = since(start, 1)
        return (many[0] - one[0]) / (calls - 1), (many[1] - one[1]) / (calls - 1)

    await inner()  # warm: pool, views, validators, Cedar
    await invoked()
    direct: list[tuple[float, float]] = []
    coded: list[tuple[float, float]] = []
    for r in range(rounds):
        sides = ((invoked, direct), (inner, coded))
        for measure, into in sides if r % 2 == 0 else sides[::-1]:
            into.append(await measure())
    d, c = (statistics.median(x[0] for x in side) * 1e6 for side in (direct, coded))
    ratios = [x[0] / y[0] for x, y in zip(coded, direct, strict=True)]
    print(f"3. inner-call overhead ({calls} calls a round, {rounds} rounds, alternating)")
    print(f"   harness.invoke {d:.1f} µs/call   from a program {c:.1f} µs/call")
    print(
        f"   ratio {c / d:.2f}x (goal ≤ 1.2x); median of per-round ratios "
        f"{statistics.median(ratios):.2f}x: " + " ".join(f"{x:.2f}" for x in ratios)
    )
    dc, cc = (sum(x[1] for x in side) / rounds * 1e6 for side in (direct, coded))
    cpu_ratios = [x[1] / y[1] for x, y in zip(coded, direct, strict=True)]
    print(
        f"   CPU time (this process and its sandbox workers; less inflated by other load "
        f"than wall time): harness.invoke {dc:.1f} µs/call   from a program {cc:.1f} µs/call   "
        f"ratio {cc / dc:.2f}x; median of per-round ratios "
        f"{statistics.median(cpu_ratios):.2f}x: " + " ".join(f"{x:.2f}" for x in cpu_ratios)
    )
    harness.close()


def clocks() -> tuple[float, float]:
    """Wall time, and CPU time of this process with its children (the Monty workers), read
    so that neither clock counts the reading of /proc."""
    children = children_cpu()
    cpu = time.process_time()
    return time.perf_counter(), cpu + children


def since(start: tuple[float, float], calls: int) -> tuple[float, float]:
    wall = time.perf_counter()
    cpu = time.process_time()
    cpu += children_cpu()
    return (wall - start[0]) / calls, (cpu - start[1]) / calls


def children_cpu() -> float:
    """Seconds on CPU of this process's live child processes, from Linux's per-thread
    scheduler statistics (nanoseconds; `os.times` counts only children that have exited)."""
    me = str(os.getpid())
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] != me:
                continue
            for task in (stat.parent / "task").glob("*/schedstat"):
                total += int(task.read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return total / 1e9


async def first_call(samples: int) -> None:
    tier = MontyTier()
    limits = CodeLimits()
    arrived: list[float] = []

    class Host:
        async def __call__(self, call: HostCall) -> Any:
            arrived.append(time.perf_counter())
            return 1

        def awaitable(self, name: str) -> str | None:
            return None

        def concurrent(self, call: HostCall) -> bool:
            return True

    await tier.run("f(1)", call=Host(), limits=limits)  # warm the pool
    waits = []
    for _ in range(samples):
        start = time.perf_counter()
        await tier.run("x = f(1)\nx", call=Host(), limits=limits)
        waits.append((arrived[-1] - start) * 1e3)
    tier.close()
    print(f"4. Monty start to first inner call ({samples} runs, warm pool)")
    print(f"   median {statistics.median(waits):.3f} ms   best {min(waits):.3f} ms (goal ≤ 1 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tk-code-mode-") as tmp:
        tokens(Path(tmp) / "tokens")
        sdk_tokens()
        anyio.run(overhead, Path(tmp) / "overhead", args.calls, args.rounds)
        anyio.run(first_call, 50)


if __name__ == "__main__":
    sys.exit(main())
