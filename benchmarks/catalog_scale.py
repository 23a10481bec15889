"""Catalog-wide work stays off the per-call path: costs at 100 / 1,000 / 10,000 tools.

For each catalog size, in one run:

In this process, on a `Harness`:
- registration: `Harness.register` per tool, with two principals' views live (each
  registration changes them in place);
- view: the first build for a capability set never seen before, then a cached lookup;
- misspelled call: `Harness.invoke` of a name one typo away from a real tool (unknown_tool
  with a "Did you mean" fix): the first (which builds the view's name index), the mean and
  the p99; a valid read-only call's mean beside it, for scale;
- listing (in memory): the gateway's ``tools/list`` through the MCP SDK's in-memory
  `Client`: the first page cold, the other pages, the first page after one more
  registration, and cached (each includes the client reading the page).

Over Streamable HTTP, against `toolkeeper serve`'s gateway in a child process:
- listing: ``tools/list`` through the MCP SDK `Client` — the first page cold (the view's
  listing serialized), the first page cached, and every page;
- other clients: four clients in this process call a read-only tool as fast as they can, in
  windows that alternate (quiet, noisy, noisy, quiet, ...) so drift hits both sides alike.
  In a noisy window a fifth client, in its own process, sends valid calls (the baseline: one
  more busy client), misspelled calls, or lists every page. Printed: the others' calls/s and
  p99 latency, and the ratios noisy / quiet (1.00 = unaffected).

Goal at 10,000 tools: a misspelled call ≤ 5 ms and other clients unaffected. No thresholds
are checked; the numbers are printed. The machine's other load shows in every window alike.

    python benchmarks/catalog_scale.py [--sizes 100,1000,10000] [--window 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolkeeper import Principal, Proposal, ToolContract
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

OTHERS_TOKEN = "others-token"
NOISY_TOKEN = "noisy-token"
OTHER_CLIENTS = 4
NOISES = ("calls", "misspellings", "listings")
CONFIG = f"""
home = "home"

[principals.others]
capabilities = ["read"]
token = "{OTHERS_TOKEN}"

[principals.noisy]
capabilities = ["read", "audit"]
token = "{NOISY_TOKEN}"
"""


def catalog(size: int) -> list[ToolContract]:
    """`size` read-only tools spread over services, as a large federated catalog looks."""
    return [
        ToolContract(
            id=f"svc{n % 97}.get_item_{n}",
            version="1.0.0",
            description=f"Read item {n} of service {n % 97}.",
            input_schema={
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "additionalProperties": False,
            },
            side_effect="none",
            required_capabilities=("read",),
        )
        for n in range(size)
    ]


def typo(n: int) -> str:
    return f"svc{n % 97}.get_itme_{n}"


def read_item(key: str = "") -> dict[str, Any]:
    return {"key": key}


def p99(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.99) - 1)]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


# -- in process: the harness ---------------------------------------------------------------


async def measure_harness(size: int) -> None:
    harness = Harness(
        home=Path(tempfile.mkdtemp(prefix="tk-scale-")),
        policy=CedarPolicyEngine(
            policies='@id("bench.reads") permit(principal, action, resource) '
            'when { resource.side_effect == "none" };',
            include_defaults=False,
        ),
    )
    reader = Principal("reader", capabilities=frozenset({"read"}))
    contracts = catalog(size)
    harness.views.view(reader, "mcp")
    harness.views.view(reader, "openai")
    start = time.perf_counter()
    for contract in contracts:
        harness.register(contract, executor=read_item)
    took = time.perf_counter() - start
    print(f"registration        {took:8.3f} s in all, {us(took / size)} per tool")

    start = time.perf_counter()
    harness.views.view(Principal("fresh", capabilities=frozenset({"read", "new"})), "gemini")
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(1000):
        harness.views.view(reader, "mcp")
    cached = (time.perf_counter() - start) / 1000
    print(f"view                first {first * 1e3:,.1f} ms, cached {us(cached)}")

    async def call(name: str, n: int) -> None:
        await harness.invoke(Proposal(f"c{n}", name, {"key": "k"}), principal=reader)

    first = await timed(lambda: call(typo(0), 0))
    wrong = [await timed(lambda n=n: call(typo(n % size), n)) for n in range(1, 301)]  # type: ignore[misc]
    right = [await timed(lambda n=n: call("svc0.get_item_0", n)) for n in range(300)]  # type: ignore[misc]
    print(
        f"misspelled call     first {us(first)}, mean {us(statistics.mean(wrong))}, "
        f"p99 {us(p99(wrong))}; a valid call: mean "
        f"{us(statistics.mean(right))}"
    )

    # The gateway's listing for one view through the SDK's in-memory client: the first page
    # cold (the listing made, its first page serialized), the rest of the pages, the first
    # page again after one more registration (each tool keeps its serialized entry), cached.
    gateway = GatewayServer(harness, principal_of=lambda _request: reader)
    async with Client(gateway.lowlevel) as session:
        start = time.perf_counter()
        page = await session.list_tools()
        cold = time.perf_counter() - start
        start = time.perf_counter()
        while page.next_cursor is not None:
            page = await session.list_tools(cursor=page.next_cursor)
        rest = time.perf_counter() - start
        harness.register(catalog(size + 1)[-1], executor=read_item)
        again = await timed(session.list_tools)
        cached = statistics.mean([await timed(session.list_tools) for _ in range(10)])
    print(
        f"tools/list (memory) first page cold {cold * 1e3:,.1f} ms, the other pages "
        f"{rest * 1e3:,.1f} ms; first page after a registration {again * 1e3:,.1f} ms, "
        f"cached {cached * 1e3:,.1f} ms"
    )
    harness.close()


# -- over HTTP: the gateway in a child process -----------------------------------------------


async def serve(size: int, directory: Path) -> None:
    """The child: a gateway with `size` tools; prints its URL, serves until killed."""
    from toolkeeper.gateway.app import open_gateway, serve_http
    from toolkeeper.gateway.config.settings import load_config

    path = directory / "toolkeeper.toml"
    path.write_text(CONFIG)
    os.chdir(directory)
    config = load_config(path)
    async with open_gateway(config, transport="http") as server:
        for contract in catalog(size):
            server.harness.register(contract, executor=read_item)
        await serve_http(server, config, port=0, on_ready=lambda url: print(url, flush=True))


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as session,
    ):
        yield session


async def list_every_page(session: Client) -> int:
    pages, cursor = 0, None
    while True:
        listing = await session.list_tools(cursor=cursor)
        pages += 1
        cursor = listing.next_cursor
        if cursor is None:
            return pages


async def make_noise(kind: str, url: str, size: int) -> None:
    """The child: one client making `kind` of noise until killed."""
    async with client(url, NOISY_TOKEN) as session:
        print("ready", flush=True)
        n = 0
        while True:
            n += 1
            if kind == "calls":
                await session.call_tool("svc0.get_item_0", {"key": str(n)})
            elif kind == "misspellings":
                await session.call_tool(typo(n % size), {"key": "k"})
            else:
                await list_every_page(session)


@contextmanager
def child(*arguments: str, ready: Callable[[str], bool]) -> Iterator[str]:
    """This script in a child process, until it prints a line `ready` accepts. Its stderr goes
    to a log (the gateway logs each noisy client killed mid-request), shown if it fails."""
    log = Path(tempfile.mkstemp(prefix="tk-scale-", suffix=".log")[1])
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, __file__, *arguments], stdout=subprocess.PIPE, stderr=errors, text=True
        )
    try:
        assert process.stdout is not None
        while not ready(line := process.stdout.readline().strip()):
            if process.poll() is not None:
                raise RuntimeError(f"{arguments[0]} child failed:\n{log.read_text()}")
        yield line
    finally:
        process.terminate()
        process.wait()


async def others_calls(url: str, window: float) -> list[float]:
    """The latency of every call the other clients complete in `window` seconds."""
    latencies: list[float] = []
    async with anyio.create_task_group() as tasks:
        sessions = []
        for _ in range(OTHER_CLIENTS):
            sessions.append(await tasks.start(_open, url))
        stop = time.perf_counter() + window

        async def call(session: Client) -> None:
            while (start := time.perf_counter()) < stop:
                result = await session.call_tool("svc0.get_item_0", {"key": "k"})
                assert not result.is_error, result
                latencies.append(time.perf_counter() - start)

        async with anyio.create_task_group() as callers:
            for session in sessions:
                callers.start_soon(call, session)
        tasks.cancel_scope.cancel()
    return latencies


async def _open(url: str, *, task_status: Any) -> None:
    async with client(url, OTHERS_TOKEN) as session:
        task_status.started(session)
        await anyio.sleep_forever()


async def measure_gateway(size: int, window: float, rounds: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="tk-scale-gw-"))
    serving = ("--serve", str(size), str(directory))
    with child(*serving, ready=lambda line: line.startswith("http")) as url:
        async with client(url, NOISY_TOKEN) as session:
            cold = await timed(session.list_tools)
            cached = statistics.mean([await timed(session.list_tools) for _ in range(10)])
            start = time.perf_counter()
            pages = await list_every_page(session)
            every = time.perf_counter() - start
        print(
            f"tools/list          first page cold {cold * 1e3:,.1f} ms, cached "
            f"{cached * 1e3:,.1f} ms; all {pages} pages {every * 1e3:,.1f} ms"
        )
        await others_calls(url, 0.5)  # warm both sides
        for kind in NOISES:
            quiet: list[float] = []
            noisy: list[float] = []
            for round_ in range(rounds):
                for side in ("quiet", "noisy") if round_ % 2 == 0 else ("noisy", "quiet"):
                    if side == "quiet":
                        quiet.extend(await others_calls(url, window))
                        continue
                    noise = ("--noise", kind, url, str(size))
                    with child(*noise, ready=lambda line: line == "ready"):
                        noisy.extend(await others_calls(url, window))
            q, n = len(quiet) / (window * rounds), len(noisy) / (window * rounds)
            print(
                f"others vs {kind:<13}quiet {q:7,.0f} calls/s p99 {p99(quiet) * 1e3:5.1f} ms, "
                f"noisy {n:7,.0f} calls/s p99 {p99(noisy) * 1e3:5.1f} ms; noisy/quiet "
                f"{n / q:.2f} calls/s, {p99(noisy) / p99(quiet):.2f} p99"
            )


async def main(sizes: list[int], window: float, rounds: int) -> None:
    print(
        f"{OTHER_CLIENTS} other clients; {rounds} rounds of {window} s windows per noise, "
        "quiet and noisy alternating"
    )
    for size in sizes:
        print(f"\n== {size:,} tools")
        await measure_harness(size)
        await measure_gateway(size, window, rounds)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        anyio.run(serve, int(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1:2] == ["--noise"]:
        anyio.run(make_noise, sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--sizes", default="100,1000,10000")
        parser.add_argument("--window", type=float, default=2.0)
        parser.add_argument("--rounds", type=int, default=2)
        arguments = parser.parse_args()
        sizes = [int(size) for size in arguments.sizes.split(",")]
        anyio.run(main, sizes, arguments.window, arguments.rounds)
