"""What governance costs per call, against an ungoverned MCP round trip, in one run.

(a) a trivial read-only async tool called directly;
(b) the same tool through `Harness.invoke` — all ten stages, Cedar policy, SQLite ledger;
    the same arguments each time, as (c) gets; b' gives every call new arguments, so the
    policy engine's decision cache never answers;
(c) the same tool through the official `mcp` SDK's in-memory `Client` against an
    `MCPServer` with no governance.
Also reported: a committing keyed call whose intent is written durably before the effect.

Run: python benchmarks/pipeline.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.server.mcpserver import MCPServer

from toolkeeper import Principal, Proposal, tool
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness


async def get_time_of_day(city: str) -> dict[str, Any]:
    """Read the time of day in a city."""
    return {"city": city, "hour": 12}


def get_time_of_day_sync(city: str) -> dict[str, Any]:
    """Read the time of day in a city (a sync tool: the harness runs it on a worker thread,
    where the MCP SDK's server would block its event loop with it)."""
    return {"city": city, "hour": 12}


async def interleaved(
    cases: dict[str, Callable[[int], Awaitable[Any]]], calls: int, rounds: int = 9
) -> dict[str, float]:
    """Median µs/call of each case, the cases taking turns round by round so that a noisy
    neighbour slows them alike."""
    for fn in cases.values():  # warm caches, compiled validators, Cedar
        for i in range(min(200, calls)):
            await fn(i)
    per = max(1, calls // rounds)
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for r in range(rounds):
        for label, fn in cases.items():
            start = time.perf_counter()
            for i in range(r * per, (r + 1) * per):
                await fn(i)
            samples[label].append((time.perf_counter() - start) / per * 1e6)
    result = {}
    for label, values in samples.items():
        result[label] = statistics.median(values)
        print(f"{label:<58} {result[label]:9.1f} µs/call  (best {min(values):.1f})")
    return result


async def main(calls: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="tk-bench-"))
    harness = Harness(
        home=home,
        policy=CedarPolicyEngine(
            policies='@id("bench.writes") permit(principal, action, resource) '
            'when { resource.id == "set_counter" };'
            '@id("bench.reads") permit(principal, action, resource) '
            'when { resource.side_effect == "none" };',
            include_defaults=False,
        ),
    )
    harness.register(tool(side_effect="none")(get_time_of_day))
    harness.register(tool(side_effect="none")(get_time_of_day_sync))
    counter = {"n": 0}

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=5)
    def set_counter(value: int) -> dict[str, Any]:
        """Set the counter."""
        counter["n"] = value
        return {"value": value}

    harness.register(set_counter)
    principal = Principal("bench")

    async def direct(i: int) -> Any:
        return await get_time_of_day(city="Paris")

    async def governed(i: int) -> Any:
        envelope = await harness.invoke(
            Proposal(f"c{i}", "get_time_of_day", {"city": "Paris"}), principal=principal
        )
        assert envelope.status.value == "succeeded", envelope
        return envelope

    async def governed_distinct(i: int) -> Any:
        envelope = await harness.invoke(
            Proposal(f"d{i}", "get_time_of_day", {"city": f"city-{i}"}), principal=principal
        )
        assert envelope.status.value == "succeeded", envelope
        return envelope

    async def governed_sync(i: int) -> Any:
        envelope = await harness.invoke(
            Proposal(f"s{i}", "get_time_of_day_sync", {"city": "Paris"}), principal=principal
        )
        assert envelope.status.value == "succeeded", envelope
        return envelope

    async def governed_write(i: int) -> Any:
        envelope = await harness.invoke(
            Proposal(f"w{i}", "set_counter", {"value": i}), principal=principal, session=str(i)
        )
        assert envelope.status.value == "succeeded", envelope
        return envelope

    server = MCPServer("bench")
    server.tool()(get_time_of_day)

    print(f"{calls} calls per case, 9 interleaved rounds, medians\n")
    async with Client(server) as client:

        async def mcp_call(i: int) -> Any:
            return await client.call_tool("get_time_of_day", {"city": "Paris"})

        cost = await interleaved(
            {
                "(a) direct function call": direct,
                "(b) harness.invoke, read-only, SQLite ledger": governed,
                "(b') the same, new arguments every call": governed_distinct,
                "(c) mcp SDK in-memory Client → MCPServer, no governance": mcp_call,
                "(s) harness.invoke, the tool sync (worker thread)": governed_sync,
                "(w) harness.invoke, committing keyed, durable intent": governed_write,
            },
            calls,
        )
    a, b, b2, c, s, w = cost.values()
    print(f"\nb/a = {b / a:,.0f}×   b/c = {b / c:.2f}  b'/c = {b2 / c:.2f}  (goal: b/c ≤ 0.8)")
    print(f"sync tool / async tool = {s / b:.2f}×   governed write / governed read = {w / b:.1f}×")
    harness.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))
